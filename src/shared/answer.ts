/**
 * Final-answer extraction: the content of the last `\boxed{...}` in the model's text, with nested
 * braces kept, and a whole-value `\text{...}` (or `\textbf{...}`, `\mathrm{...}`) unwrapped.
 *
 * One rule decides which box counts, for the stop reason and the answer alike (`finalAnswer`): a box
 * lies within one answer of the model (one policy call's text); the last non-empty box of the last
 * answer that has one is the final answer. A box whose content is longer than MAX_ANSWER_CHARS is
 * not an answer (an answer is a letter, a number, a short phrase; a box opened early and closed at
 * the end is the whole response). Extraction is one linear pass, whatever the text holds.
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
 * The final answer of a session from each answer's own box (`boxes[i]`: `extractBoxedAnswer` of
 * answer i, or null): the last answer that has one, and which answer it is (-1 when none).
 */
export function finalAnswer(boxes: ReadonlyArray<string | null>): { answer: string | null; index: number } {
  for (let k = boxes.length - 1; k >= 0; k--) if (boxes[k] !== null) return { answer: boxes[k], index: k };
  return { answer: null, index: -1 };
}
