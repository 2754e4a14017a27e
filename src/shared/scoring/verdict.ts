/**
 * The judge's vocabulary: the three verdicts a judge may give, the reward each one is worth, and the
 * tokens a grading cost. The records (rows, transcripts) and the judge meet through these words.
 */

export const VERDICTS = ['equivalent', 'different', 'unsure'] as const;
export type Verdict = (typeof VERDICTS)[number];

/** reward is 1 only for `equivalent`. */
export function rewardFor(verdict: Verdict): 0 | 1 {
  return verdict === 'equivalent' ? 1 : 0;
}

/** A judge's token usage, as its replies report it (`usage.prompt_tokens`, `usage.completion_tokens`). */
export interface JudgeUsage {
  input_tokens: number;
  output_tokens: number;
}
