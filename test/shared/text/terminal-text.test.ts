/** Text printed for a person: terminal controls and invisible format characters escaped, newlines and tabs kept. */
import { describe, expect, it } from 'vitest';
import { terminalText } from '../../../src/shared/text/terminal-text.ts';

describe('terminalText', () => {
  it('escapes what a terminal would act on or hide, and nothing else', () => {
    expect(terminalText('clear\x1b[2J\x1b[H')).toBe('clear\\x1b[2J\\x1b[H');
    expect(terminalText('\x1b]52;c;cm0gLXJmIH4=\x07')).toBe('\\x1b]52;c;cm0gLXJmIH4=\\x07');
    expect(terminalText('a\rb\x00\x7f\u009b2J')).toBe('a\\x0db\\x00\\x7f\\x9b2J');
    expect(terminalText('left\u202eright\u200bzero\u2066iso\ufeff')).toBe('left\\u202eright\\u200bzero\\u2066iso\\ufeff');
    expect(terminalText('line 1\n\tline 2 — ünïcode 中文 ✓')).toBe('line 1\n\tline 2 — ünïcode 中文 ✓');
  });
});
