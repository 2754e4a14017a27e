/** Cutting text by code point, never inside a surrogate pair: the head or the tail of a string. */

export interface Cut {
  text: string;
  /** True when characters were dropped. */
  truncated: boolean;
}

/** The first `maxChars` code points of `text`. */
export function headChars(text: string, maxChars: number): Cut {
  if (text.length <= maxChars) return { text, truncated: false };
  let units = 0;
  for (let n = 0; n < maxChars && units < text.length; n++) {
    units += (text.codePointAt(units) ?? 0) > 0xffff ? 2 : 1;
  }
  return { text: text.slice(0, units), truncated: units < text.length };
}

/** The last `maxChars` code points of `text`. */
export function tailChars(text: string, maxChars: number): Cut {
  if (text.length <= maxChars) return { text, truncated: false };
  let start = text.length;
  for (let n = 0; n < maxChars && start > 0; n++) {
    const low = text.charCodeAt(start - 1);
    const high = start >= 2 ? text.charCodeAt(start - 2) : 0;
    const pair = low >= 0xdc00 && low <= 0xdfff && high >= 0xd800 && high <= 0xdbff;
    start -= pair ? 2 : 1;
  }
  return { text: text.slice(start), truncated: start > 0 };
}
