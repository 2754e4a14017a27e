/**
 * Building DOM without HTML strings: every text goes in as a Text node, every attribute through
 * setAttribute, and attributes that run script or carry inline style are refused. Model output
 * (untrusted HTML) therefore shows literally.
 */

export type Child = Node | string | number | null | undefined | false;
export type Attrs = Record<string, string | number | boolean | null | undefined>;

const SVG_NS = 'http://www.w3.org/2000/svg';

function setAttrs(el: Element, attrs: Attrs | null | undefined): void {
  if (!attrs) return;
  for (const [name, value] of Object.entries(attrs)) {
    if (/^on/i.test(name) || name.toLowerCase() === 'style') throw new Error(`refusing attribute "${name}": no inline script or style`);
    if (value === null || value === undefined || value === false) continue;
    el.setAttribute(name, value === true ? '' : String(value));
  }
}

function append(el: Element, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child);
  }
}

/** An HTML element with attributes and children (strings become text, never markup). */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element with attributes and children. */
export function s<K extends keyof SVGElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** Replace everything inside `el` with `children`. */
export function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/** `0.6667` -> `66.7%`; null -> `–`. */
export function pct(x: number | null | undefined, digits = 1): string {
  return x === null || x === undefined ? '–' : `${(100 * x).toFixed(digits)}%`;
}

/** A number with thousands separators, for counts. */
export function num(n: number): string {
  return n.toLocaleString('en-US');
}

/** `text` cut to `max` characters with an ellipsis (for chart labels; the full text goes in a title). */
export function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
