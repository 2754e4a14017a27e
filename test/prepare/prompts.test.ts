import { describe, expect, it } from 'vitest';
import { SEPARATOR, buildPrompt, formatQuestion } from '../../src/prepare/prompts.ts';

describe('formatQuestion', () => {
  it('puts lettered options under the question', () => {
    expect(formatQuestion('Which is odd?  ', ['cat', ' dog '])).toBe('Which is odd?\n(A) cat\n(B) dog');
  });
  it('leaves a question without options alone', () => {
    expect(formatQuestion('How many?', [])).toBe('How many?');
  });
});

describe('buildPrompt', () => {
  const q = formatQuestion('Which is odd?', ['cat', 'dog']);

  it('babyvision_opencode: instruction, separator, question, closing line', () => {
    const prompt = buildPrompt('babyvision_opencode', q, 'choice');
    const [instruction, rest] = prompt.split(`\n\n${SEPARATOR}\n\n`);
    for (const word of ['python3', 'pillow', 'numpy', 'scipy', 'opencv', '`bash`', '`read`', 'one sentence', '\\boxed{}']) {
      expect(instruction).toContain(word);
    }
    expect(instruction).toMatch(/count/i);
    expect(instruction).toMatch(/coordinates/);
    expect(instruction).toMatch(/pixel/);
    expect(instruction).toMatch(/path/);
    expect(rest.startsWith(q)).toBe(true);
    expect(rest.split('\n').at(-1)).toMatch(/letter.*\\boxed\{\}/);
  });

  it('babyvision_opencode closes a blank question without asking for a letter', () => {
    const last = buildPrompt('babyvision_opencode', 'How many?', 'blank').split('\n').at(-1);
    expect(last).toContain('\\boxed{}');
    expect(last).not.toMatch(/letter/);
  });

  it('babyvision_opencode_question_only: the question and options only', () => {
    expect(buildPrompt('babyvision_opencode_question_only', q, 'choice')).toBe(q);
  });
});
