/**
 * Final-answer extraction: the content of the last `\boxed{...}` in the model's text, with nested
 * braces kept, and a whole-value `\text{...}` (or `\textbf{...}`, `\mathrm{...}`) unwrapped.
 */

const BOX_COMMANDS = ['\\boxed', '\\fbox'];
const WRAPPERS = ['\\text', '\\textbf', '\\mathrm', '\\mathbf'];

/** The balanced `{...}` group starting at `open` (which must be `{`); returns its inner text and end. */
function readGroup(text: string, open: number): { inner: string; end: number } | null {
  if (text[open] !== '{') return null;
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const ch = text[i];
    if (ch === '\\') {
      i++; // an escaped character (`\{`, `\}`) never opens or closes a group
      continue;
    }
    if (ch === '{') depth++;
    else if (ch === '}') {
      depth--;
      if (depth === 0) return { inner: text.slice(open + 1, i), end: i };
    }
  }
  return null;
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

/** Every `\boxed{...}` content in order of appearance (unwrapped, trimmed). */
export function extractAllBoxed(text: string): string[] {
  const found: string[] = [];
  let i = 0;
  while (i < text.length) {
    let best = -1;
    let command = '';
    for (const c of BOX_COMMANDS) {
      const at = text.indexOf(c, i);
      if (at >= 0 && (best < 0 || at < best)) {
        best = at;
        command = c;
      }
    }
    if (best < 0) break;
    let open = best + command.length;
    // `\boxedfoo` is another command; spaces before the brace are allowed in LaTeX.
    while (text[open] === ' ') open++;
    const group = readGroup(text, open);
    if (!group) {
      i = best + command.length;
      continue;
    }
    found.push(unwrap(group.inner));
    i = group.end + 1;
  }
  return found;
}

/** The last `\boxed{...}` content, or null when there is none (an empty box counts as none). */
export function extractBoxedAnswer(text: string): string | null {
  const all = extractAllBoxed(text);
  for (let k = all.length - 1; k >= 0; k--) if (all[k] !== '') return all[k];
  return null;
}
