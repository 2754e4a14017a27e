/**
 * Text a person reads in a terminal, made safe to print: every control character but the newline and
 * the tab (ESC and its sequences: clear screen, OSC 52 clipboard writes, colours; C1 controls such as
 * CSI U+009B; carriage returns that overwrite a line) and every invisible format character (bidi
 * overrides and isolates, zero-width characters, which hide or reorder text) is printed escaped, as
 * `\x1b` or `\u202e`, so what a serve client or a model put in a task id, type or subtype reaches
 * the reader as text. Used by every command that prints for a person (compare, status, runs, metrics).
 */

/** C0 controls but \t and \n, DEL, C1 controls, and the invisible format characters that hide or reorder text. */
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]/g;

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');

/** `text` with every character a terminal would act on (or hide) written as its escape instead. */
export function terminalText(text: string): string {
  return text.replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${hex(code, 2)}` : `\\u${hex(code, 4)}`;
  });
}
