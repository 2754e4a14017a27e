import { describe, expect, it } from 'vitest';
import { extractAllBoxed, extractAnswer, extractBoxedAnswer, MAX_ANSWER_CHARS, responseText } from '../../../src/shared/scoring/answer.ts';
import { stringMatchReward } from '../../../src/shared/scoring/string-match.ts';

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

const answerOf = (...parts: string[]) => extractAnswer(parts)?.answer ?? null;

describe('extractAnswer: the reference\'s rule', () => {
  it('takes an Answer: line without a box', () => {
    expect(answerOf('Looking at the picture, the second option fits.\nAnswer: B')).toBe('B');
  });
  it('prefers the last Final answer: line to an earlier box', () => {
    expect(answerOf('I first thought \\boxed{5}.\nAfter measuring again, Final answer: 7.')).toBe('7');
    // ... and to a later one: a line beats every box.
    expect(answerOf('Answer: 7\nas a box: \\boxed{8}')).toBe('7');
  });
  it('matches any letter case and a full-width colon', () => {
    expect(answerOf('FINAL ANSWER: C')).toBe('C');
    expect(answerOf('final   answer : (4,7)')).toBe('(4,7)');
    expect(answerOf('Answer\uff1a B')).toBe('B');
  });
  it('takes the rest of the line, trimmed, one trailing period dropped', () => {
    expect(answerOf('Answer:   12 squares.  \nI counted twice.')).toBe('12 squares');
    expect(answerOf('Answer: 3..')).toBe('3.');
    expect(answerOf('Answer: 2.5')).toBe('2.5');
  });
  it('takes the last answer line of the text', () => {
    expect(answerOf('Answer: A\nwait, no.\nAnswer: C')).toBe('C');
  });
  it('reads on to the next line with text when nothing follows the colon (the reference\'s pattern)', () => {
    expect(answerOf('Final answer:\n\n  \\boxed{7}')).toBe('\\boxed{7}');
  });
  it('two answer lines on one line: the rest of the line from the first, as the reference\'s non-overlapping matches read it', () => {
    expect(answerOf('Answer: B. Final answer: C')).toBe('B. Final answer: C');
  });
  it('falls back to the last box, then to nothing', () => {
    expect(answerOf('so \\boxed{\\text{D}}')).toBe('D');
    expect(answerOf('There are twelve squares in the grid.')).toBeNull();
    expect(answerOf('')).toBeNull();
    expect(extractAnswer([])).toBeNull();
  });
  it('an empty or over-long answer line is no answer: an earlier line or a box counts instead', () => {
    expect(answerOf('Answer: B\nAnswer: .')).toBe('B');
    expect(answerOf(`\\boxed{E}\nAnswer: ${'x'.repeat(MAX_ANSWER_CHARS + 1)}`)).toBe('E');
    expect(answerOf(`Answer: ${'x'.repeat(MAX_ANSWER_CHARS)}`)).toHaveLength(MAX_ANSWER_CHARS);
  });
  it('says which part (policy call) the answer lies in: lines across the joined text, boxes within one part', () => {
    expect(extractAnswer(['Let me measure. Answer: maybe A', '', 'The size is 40.'])).toEqual({ answer: 'maybe A', kind: 'line', part: 0 });
    expect(extractAnswer(['\\boxed{A}', 'checking', 'so \\boxed{C} it is', 'done'])).toEqual({ answer: 'C', kind: 'boxed', part: 2 });
    // A box opened in one answer and closed in another is no box.
    expect(extractAnswer(['\\boxed{A', 'B}'])).toBeNull();
  });
  it('is linear on hostile text', () => {
    const text = `${'answer'.repeat(200_000)}${' '.repeat(500_000)}${'Answer:\n'.repeat(100_000)}Answer: Z`;
    expect(answerOf(text)).toBe('Z');
  });
});

describe('responseText', () => {
  it('is every text part in order, joined by a newline, trimmed', () => {
    expect(responseText(['  Let me look.', '', 'Answer: B \n'])).toBe('Let me look.\nAnswer: B');
  });
});

describe('stringMatchReward: the reference\'s string-match rules', () => {
  it.each([
    ['oven', 'oven', 1], ['oven', 'Oven', 1], ['oven', '  oven  ', 1], ['oven', 'stove', 0],
    ['B', '\uff22', 1], // NFKC: a full-width letter
    ['B', '"B"', 1], ['B', "'b'", 1], ['12', '12.', 1], ['yes', 'yes!?', 1],
    ['7', '7.0', 1], ['0.5', '.5', 1], ['1000', '1,000', 1], ['1234567', '1,234,567', 1],
    ['B', '\\text{B}', 1], ['12', '$12$', 1], ['(4,7)', '\\((4,7)\\)', 1], ['x', '\\boxed{\\mathrm{x}}', 1],
    ['A, C', 'A and C', 1], ['A, C', 'A; C', 1], ['red or blue', 'red, blue', 1],
    ['100', '100.5', 0.98], ['100', '99.2', 0.98], ['100', '102', 0], ['$100', '100.4', 0.98],
    ['(4,7)', '(4,7)', 1], ['(4,7)', '(7,4)', 0], ['B', '(B)', 0], ['12', 'twelve', 0],
  ])('gold %j, extracted %j -> %d', (gold, extracted, reward) => {
    expect(stringMatchReward(gold, extracted)).toBe(reward);
  });
  it('nothing extracted is 0', () => {
    expect(stringMatchReward('B', null)).toBe(0);
  });
});
