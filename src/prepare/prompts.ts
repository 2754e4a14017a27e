/**
 * The prompt text of each benchmark variant. Both variants ask the same question with the same
 * options; `babyvision_opencode` wraps it in an instruction on how to work with the image.
 */
import type { BenchmarkName } from '../shared/config/load.ts';
import { optionLetter } from './babyvision-row.ts';

/** Bumped whenever the prompt text changes, so an older preparation is not silently reused. */
export const PROMPT_VERSION = 2;

export const SEPARATOR = '---';

/** The question with its options under it as `(A) ...` lines: the text the judge also sees. */
export function formatQuestion(question: string, options: readonly string[]): string {
  const body = question.trim();
  if (options.length === 0) return body;
  const lines = options.map((option, i) => `(${optionLetter(i)}) ${option.trim()}`);
  return `${body}\n${lines.join('\n')}`;
}

const INSTRUCTION = [
  'You are solving a visual puzzle. The picture it refers to is attached to this message.',
  'Study the picture carefully before anything else, and form a first impression of the answer.',
  'Whenever the answer depends on precision (counting objects exactly, locating coordinates, ' +
    'comparing pixel colours or sizes, following a line or path from end to end), check it with code ' +
    'instead of trusting your eye.',
  'Your tools: `bash` runs shell commands, and its `python3` has pillow, numpy, scipy and opencv ' +
    'installed for cropping, zooming, measuring and drawing on the image; `read` shows you an image ' +
    'file, including any crop or plot you save yourself; `write` and `edit` create and change files, ' +
    '`glob` and `grep` find files and text, and `todowrite` keeps a short plan of your steps.',
  'Before every tool call, state in one sentence what that call is meant to check.',
  'When you are done, give your final answer inside \\boxed{}.',
].join('\n');

function closingLine(ansType: 'choice' | 'blank'): string {
  return ansType === 'choice'
    ? 'Finish with the letter of the correct option inside \\boxed{}, for example \\boxed{A}.'
    : 'Finish with your final answer inside \\boxed{}.';
}

/** The full user prompt of one task for one benchmark variant. */
export function buildPrompt(
  benchmark: BenchmarkName,
  questionWithOptions: string,
  ansType: 'choice' | 'blank',
): string {
  if (benchmark === 'babyvision_opencode_question_only') return questionWithOptions;
  return `${INSTRUCTION}\n\n${SEPARATOR}\n\n${questionWithOptions}\n\n${closingLine(ansType)}`;
}
