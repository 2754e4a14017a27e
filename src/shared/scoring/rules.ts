/**
 * The scoring rules, the reference's (REFERENCE.md "Scoring rules"), as decisions on a rollout's
 * outcome: whether it goes to the judge, how a rollout graded under older rules is brought up to
 * today's, and a row's `failure_reason`. Pure; the sandbox worker, the judge stage, rejudge and the
 * row all decide through here.
 *
 * - A run that did not complete (stop reason `timeout`, `output_cap`, `context_limit`, `agent_error`)
 *   scores 0 without a judge call, whatever text it had; so does a finished run (`answered`,
 *   `no_answer`) whose response text is empty. Both are scores, never masked.
 * - A finished run with response text is judged, whether or not an answer was extracted (the judge's
 *   prompt says when nothing was).
 *
 * `SCORING_RULES` numbers the rules a rollout was graded by (its outcome's and its row's
 * `scoring_rules`): 1, the fleet's first (the last `\boxed{}` only; unboxed text scored 0 without a
 * judge call); 2, the reference's (an `Answer:` line first; unboxed text judged). `vcfleet rejudge
 * --rescore` grades a run's rows of older rules again under today's.
 */
import { extractAnswer } from './answer.ts';
import type { StopReason } from './stop-reasons.ts';

/** What of a rollout's outcome (rollout-outcome.ts) the rules read. */
export interface ScoredOutcome {
  stop_reason: StopReason;
  extracted_answer: string | null;
  response_tail: string;
  response_truncated: boolean;
  scoring_rules: number;
}

/** The rules this code grades by. */
export const SCORING_RULES = 2;

/** Stop reasons of a session the model ended itself (its last message), as opposed to a limit or a failure. */
const FINISHED: ReadonlySet<StopReason> = new Set(['answered', 'no_answer']);

export function finishedNaturally(stopReason: StopReason | null): boolean {
  return stopReason !== null && FINISHED.has(stopReason);
}

export type GradingPlan =
  | { kind: 'judge' }
  /** 0 without a judge call: the run did not complete, or it ended with no text at all. */
  | { kind: 'zero'; why: 'incomplete' | 'no_response' };

/** Whether an outcome goes to the judge (see the header). */
export function gradingPlan(outcome: Pick<ScoredOutcome, 'stop_reason' | 'response_tail'>): GradingPlan {
  if (!finishedNaturally(outcome.stop_reason)) return { kind: 'zero', why: 'incomplete' };
  if (outcome.response_tail.trim() === '') return { kind: 'zero', why: 'no_response' };
  return { kind: 'judge' };
}

/**
 * An outcome as today's rules read it. One graded by older rules (a queued judge job, a kept outcome
 * that rejudge sends again) has its answer extracted again from its stored response text, and a
 * finished run its stop reason (`answered` when something was extracted). When the stored text is
 * only the end of a longer one and holds no answer, the answer extracted from the whole text then
 * stands (it lies before the stored end).
 */
export function currentOutcome<T extends ScoredOutcome>(outcome: T): T {
  if (outcome.scoring_rules >= SCORING_RULES) return outcome;
  const found = extractAnswer([outcome.response_tail])?.answer ?? null;
  const answer = found ?? (outcome.response_truncated ? outcome.extracted_answer : null);
  const stop_reason = finishedNaturally(outcome.stop_reason) ? (answer === null ? 'no_answer' : 'answered') : outcome.stop_reason;
  return { ...outcome, extracted_answer: answer, stop_reason, scoring_rules: SCORING_RULES };
}

/** A row's `failure_reason`, the reference's names (the gym export keeps its wider set, gym-row.ts). */
export const ROW_FAILURE_REASONS = ['no_response', 'judge_error', 'incorrect_answer'] as const;
export type RowFailureReason = (typeof ROW_FAILURE_REASONS)[number];

/**
 * Why a row did not earn 1: null for a 1; `judge_error` for a masked judge failure; `no_response`
 * when no judge was asked (the run did not complete or left no text, or its infrastructure failed);
 * `incorrect_answer` for a judged 0 (`different`, `unsure`, or a grading input the judge refused).
 */
export function rowFailureReason(row: {
  reward: number | null; failure_kind: string | null; judge_verdict: string | null; judge_failure?: string | null;
}): RowFailureReason | null {
  if (row.failure_kind === 'judge_failed') return 'judge_error';
  if (row.failure_kind !== null) return 'no_response';
  if (row.reward === 1) return null;
  return row.judge_verdict !== null || row.judge_failure === 'refused_input' ? 'incorrect_answer' : 'no_response';
}
