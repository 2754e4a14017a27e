/**
 * Final-answer extraction, the reference's rule (`extractAnswer`), one function for the stop reason,
 * the row and rejudge alike:
 *
 * 1. the last `Final answer:` or `Answer:` (any letter case; an ASCII or a full-width colon) takes
 *    the rest of its line (when nothing follows the colon on it, the next line with text, as the
 *    reference's pattern reads it), trimmed, one trailing period dropped;
 * 2. else the content of the last `\boxed{...}`, with nested braces kept and a whole-value
 *    `\text{...}` (or `\textbf{...}`, `\mathrm{...}`) unwrapped; a box lies within one answer of the
 *    model (one policy call's text), and the last non-empty box of the last answer that has one counts;
 * 3. else nothing.
 *
 * An answer whose value is longer than MAX_ANSWER_CHARS is not an answer (an answer is a letter, a
 * number, a short phrase; a box opened early and closed at the end is the whole response), and
 * neither is an empty one. Extraction is linear in the text, whatever the text holds.
 */

const BOX_COMMANDS = ['\\boxed', '\\fbox'];
const WRAPPERS = ['\\text', '\\textbf', '\\mathrm', '\\mathbf'];

/** The longest box content that counts as an answer, in UTF-16 code units. */
export const MAX_ANSWER_CHARS = 1000;

/** For every `{` of `text`, the index of its matching `}` (-1 when it has none); escaped braces never count. One pass. */
function matchBraces(text: string): Int32Array {
  const match = new Int32Array(text.length).fill(-1);
  const open: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (ch === 0x5c /* \ */) {
      i++; // an escaped character (`\{`, `\}`) never opens or closes a group
      continue;
    }
    if (ch === 0x7b /* { */) open.push(i);
    else if (ch === 0x7d /* } */ && open.length > 0) match[open.pop()!] = i;
  }
  return match;
}

/** The balanced `{...}` group starting at `open` of a short value (for unwrapping). */
function readGroup(text: string, open: number): { inner: string; end: number } | null {
  if (text[open] !== '{') return null;
  const close = matchBraces(text)[open];
  return close < 0 ? null : { inner: text.slice(open + 1, close), end: close };
}

/** `\text{B}` -> `B` when the wrapper spans the whole value; repeated for `\text{\textbf{B}}`. */
function unwrap(value: string): string {
  let out = value.trim();
  for (;;) {
    const wrapper = WRAPPERS.find((w) => out.startsWith(w) && /^\s*\{/.test(out.slice(w.length)));
    if (!wrapper) return out;
    const open = out.indexOf('{', wrapper.length);
    const group = readGroup(out, open);
    if (!group || group.end !== out.length - 1) return out;
    out = group.inner.trim();
  }
}

/** Finds the box commands of one text in order; each command's next position is searched again only once passed (linear). */
class CommandFinder {
  private readonly next = BOX_COMMANDS.map(() => -2);

  constructor(private readonly text: string) {}

  /** The next box command at or after `from`: its position and length, or null. */
  find(from: number): { at: number; length: number } | null {
    let best: { at: number; length: number } | null = null;
    BOX_COMMANDS.forEach((c, k) => {
      if (this.next[k] !== -1 && this.next[k] < from) this.next[k] = this.text.indexOf(c, from);
      const at = this.next[k];
      if (at >= 0 && (best === null || at < best.at)) best = { at, length: c.length };
    });
    return best;
  }
}

/** Every `\boxed{...}` content of one text in order of appearance (unwrapped, trimmed); boxes over MAX_ANSWER_CHARS are left out. */
export function extractAllBoxed(text: string): string[] {
  const found: string[] = [];
  let match: Int32Array | null = null;
  let i = 0;
  const commands = new CommandFinder(text);
  for (let cmd = commands.find(0); cmd !== null; cmd = commands.find(i)) {
    let open = cmd.at + cmd.length;
    // `\boxedfoo` is another command; spaces before the brace are allowed in LaTeX.
    while (text[open] === ' ') open++;
    match ??= matchBraces(text);
    const close = text[open] === '{' ? match[open] : -1;
    if (close < 0) {
      i = cmd.at + cmd.length;
      continue;
    }
    if (close - open - 1 <= MAX_ANSWER_CHARS) found.push(unwrap(text.slice(open + 1, close)));
    i = close + 1;
  }
  return found;
}

/** The last non-empty `\boxed{...}` content of one text, or null when there is none. */
export function extractBoxedAnswer(text: string): string | null {
  const all = extractAllBoxed(text);
  for (let k = all.length - 1; k >= 0; k--) if (all[k] !== '') return all[k];
  return null;
}

/**
 * `Final answer: X` / `Answer: X` lines: the reference's pattern. `\s*` after the colon crosses line
 * ends (so `Answer:` alone on its line takes the next line with text); the value is the rest of that
 * line. Matches do not overlap: a line holding two takes the rest of the line from the first.
 */
const ANSWER_LINE = /(?:final\s+answer|answer)\s*[:\uff1a]\s*([^\n]+)/gi;

/** The value of one answer line: trimmed, one trailing period dropped; null when empty or too long. */
function lineValue(raw: string): string | null {
  let value = raw.trim();
  if (value.endsWith('.')) value = value.slice(0, -1).trim();
  return value === '' || value.length > MAX_ANSWER_CHARS ? null : value;
}

/** Where an extracted answer came from: an answer line or a box, and which part (policy call) of the text holds it. */
export interface ExtractedAnswer {
  answer: string;
  kind: 'line' | 'boxed';
  /** Index into the parts given to `extractAnswer`. */
  part: number;
}

/** The response text of a session: its assistant text parts in order, joined by a newline, trimmed. */
export function responseText(parts: readonly string[]): string {
  return parts.filter((t) => t !== '').join('\n').trim();
}

/** The last answer line of `text` that holds an answer, and where it starts; null when none does. */
export function lastAnswerLine(text: string): { answer: string; at: number } | null {
  let found: { answer: string; at: number } | null = null;
  for (const m of text.matchAll(ANSWER_LINE)) {
    const answer = lineValue(m[1]);
    if (answer !== null) found = { answer, at: m.index };
  }
  return found;
}

/**
 * The final answer of a session whose assistant text parts (one per answered policy call, in order)
 * are `parts`: the reference's rule (see the header), and the part it lies in. A stored response text
 * (rejudge) is one part.
 */
export function extractAnswer(parts: readonly string[]): ExtractedAnswer | null {
  const kept = parts.map((text, part) => ({ text, part })).filter((p) => p.text !== '');
  const joined = kept.map((p) => p.text).join('\n');
  const line = lastAnswerLine(joined);
  if (line) {
    let start = 0;
    for (const p of kept) {
      if (line.at < start + p.text.length + 1) return { answer: line.answer, kind: 'line', part: p.part };
      start += p.text.length + 1;
    }
  }
  for (let k = kept.length - 1; k >= 0; k--) {
    const boxed = extractBoxedAnswer(kept[k].text);
    if (boxed !== null) return { answer: boxed, kind: 'boxed', part: kept[k].part };
  }
  return null;
}
