import { describe, expect, it } from 'vitest';
import { extractAllBoxed, extractBoxedAnswer, finalAnswer, MAX_ANSWER_CHARS } from '../src/shared/answer.ts';

describe('extractBoxedAnswer', () => {
  it('takes the last boxed value', () => {
    expect(extractBoxedAnswer('first \\boxed{A} then \\boxed{C}.')).toBe('C');
  });
  it('keeps nested braces', () => {
    expect(extractBoxedAnswer('so \\boxed{\\frac{1}{2}}')).toBe('\\frac{1}{2}');
    expect(extractBoxedAnswer('\\boxed{x^{2}+{y}}')).toBe('x^{2}+{y}');
  });
  it('unwraps a whole-value \\text', () => {
    expect(extractBoxedAnswer('\\boxed{\\text{B}}')).toBe('B');
    expect(extractBoxedAnswer('\\boxed{ \\text{ (B) } }')).toBe('(B)');
    expect(extractBoxedAnswer('\\boxed{\\textbf{\\text{D}}}')).toBe('D');
  });
  it('keeps \\text that is only part of the value', () => {
    expect(extractBoxedAnswer('\\boxed{3\\text{ cm}}')).toBe('3\\text{ cm}');
    expect(extractBoxedAnswer('\\boxed{\\text{a} and \\text{b}}')).toBe('\\text{a} and \\text{b}');
  });
  it('returns null without a box, with an unclosed box, or an empty one', () => {
    expect(extractBoxedAnswer('The answer is B.')).toBeNull();
    expect(extractBoxedAnswer('\\boxed{B')).toBeNull();
    expect(extractBoxedAnswer('\\boxed{}')).toBeNull();
    expect(extractBoxedAnswer('')).toBeNull();
  });
  it('skips an unclosed box but keeps an earlier one', () => {
    expect(extractBoxedAnswer('\\boxed{A} and later \\boxed{')).toBe('A');
  });
  it('ignores escaped braces when matching', () => {
    expect(extractBoxedAnswer('\\boxed{\\{1,2\\}}')).toBe('\\{1,2\\}');
  });
  it('accepts a space before the brace and \\fbox', () => {
    expect(extractBoxedAnswer('\\boxed {7}')).toBe('7');
    expect(extractBoxedAnswer('\\fbox{E}')).toBe('E');
  });
  it('lists every box in order', () => {
    expect(extractAllBoxed('\\boxed{1} x \\boxed{\\text{2}} \\boxed{}')).toEqual(['1', '2', '']);
  });
  it('handles multiline text', () => {
    expect(extractBoxedAnswer('line\n\\boxed{\n  12\n}\n')).toBe('12');
  });
  it('a box longer than MAX_ANSWER_CHARS is not an answer; one at the bound is', () => {
    expect(extractBoxedAnswer(`\\boxed{${'x'.repeat(MAX_ANSWER_CHARS + 1)}}`)).toBeNull();
    expect(extractBoxedAnswer(`\\boxed{${'x'.repeat(MAX_ANSWER_CHARS)}}`)).toHaveLength(MAX_ANSWER_CHARS);
    // A box opened early and closed at the end is the whole response, not an answer; the early one counts.
    expect(extractBoxedAnswer(`\\boxed{B} then \\boxed{ ${'w'.repeat(700_000)} }`)).toBe('B');
  });
  it('reads any text in one pass: hundreds of thousands of unclosed boxes, then an answer', () => {
    expect(extractBoxedAnswer(`${'\\boxed{'.repeat(300_000)}\\boxed{Z}`)).toBe('Z');
  });
});

describe('finalAnswer', () => {
  it('is the box of the last answer that has one, and says which', () => {
    expect(finalAnswer(['A', null, 'C', null])).toEqual({ answer: 'C', index: 2 });
    expect(finalAnswer([null, null])).toEqual({ answer: null, index: -1 });
    expect(finalAnswer([])).toEqual({ answer: null, index: -1 });
  });
});
