/**
 * The output row: one per rollout, versioned, parsed again by the results consumer before writing.
 */
import { z } from 'zod';
import { STOP_REASONS } from './agent.ts';
import { MAX_ANSWER_CHARS } from './answer.ts';
import { VERDICTS } from './judge.ts';
import type { RolloutSummary } from './rollout-summary.ts';

export const FAILURE_KINDS = ['judge_failed', 'infra_failed'] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

export const JUDGE_FAILURES = ['refused_input', 'no_verdict', 'unavailable'] as const;
export type JudgeFailure = (typeof JUDGE_FAILURES)[number];

export const RowSchema = z.object({
  row_version: z.literal(1).default(1),
  run_id: z.string(),
  rollout_id: z.string(),
  task_id: z.string(),
  repeat: z.number().int().min(0),
  benchmark: z.string(),
  type: z.string(),
  subtype: z.string(),
  ans_type: z.enum(['choice', 'blank']),
  expected_answer: z.string(),
  extracted_answer: z.string().max(MAX_ANSWER_CHARS).nullable(),
  /** 1 or 0; null when masked (`failure_kind` set). */
  reward: z.union([z.literal(0), z.literal(1)]).nullable(),
  judge_verdict: z.enum(VERDICTS).nullable(),
  judge_reason: z.string().nullable(),
  stop_reason: z.enum(STOP_REASONS).nullable(),
  failure_kind: z.enum(FAILURE_KINDS).nullable(),
  turns: z.number().int().min(0),
  tool_calls: z.number().int().min(0),
  input_tokens: z.number().int().min(0),
  output_tokens: z.number().int().min(0),
  wall_s: z.number().min(0),
  policy_model: z.string(),
  judge_model: z.string().nullable(),
  /** Why the row is masked or the agent failed (no secrets). */
  error: z.string().nullable().default(null),
  /** When the row was made (ISO 8601). */
  finished_at: z.string(),
  /** Times the sandbox hit a resource limit, by limit (`{memory: 1}`); the model's doing, never masked. */
  limit_hits: z.record(z.string(), z.number().int().min(0)).default({}),
  /** Requests of the sandbox that the policy gateway refused, by reason (`{path: 2}`). */
  refused_requests: z.record(z.string(), z.number().int().min(0)).default({}),
  /** The rollout's transcript record, relative to the JSONL's folder; null when none was kept. */
  transcript: z.string().nullable().default(null),
  /** Chat calls that were not the agent's own conversation (made by something the model ran); they never count. */
  forged_calls: z.number().int().min(0).default(0),
  /**
   * Why the judge gave no verdict, when it did not: `refused_input` (the rollout's own content made the
   * judge refuse it: its context length, a content filter; scored 0), `no_verdict` (a reply without a
   * valid verdict, after one more try; masked) or `unavailable` (the judge failed; masked).
   */
  judge_failure: z.enum(JUDGE_FAILURES).nullable().default(null),
});
export type Row = z.infer<typeof RowSchema>;

export function isMasked(row: Pick<Row, 'failure_kind'>): boolean {
  return row.failure_kind !== null;
}

/**
 * Which of two rows for the same rollout stands: the first one, unless it is masked and the new one
 * differs (a rejudge or a retried rollout replaces its masked row). Duplicate deliveries of a scored
 * row never change it, so every rollout ends with exactly one stable row.
 */
export function shouldReplace(existing: Row, incoming: Row): boolean {
  if (!isMasked(existing)) return false;
  return JSON.stringify({ ...existing, finished_at: '' }) !== JSON.stringify({ ...incoming, finished_at: '' });
}

export interface RowContext {
  runId: string;
  benchmark: string;
  policyModel: string;
  judgeModel: string | null;
  rolloutId: string;
  repeat: number;
  task: { task_id: string; type: string; subtype: string; ans_type: 'choice' | 'blank'; gold: string };
}

/** The agent's part of a row: a rollout's summary (the end of its text is not kept in rows). */
export type RowSummary = Omit<RolloutSummary, 'response_tail' | 'stop_reason' | 'error' | 'limit_hits' | 'refused_requests' | 'forged_calls'> &
  Partial<Pick<RolloutSummary, 'error' | 'limit_hits' | 'refused_requests' | 'forged_calls'>> & { stop_reason: Row['stop_reason'] };

const NO_SUMMARY: RowSummary = {
  stop_reason: null, extracted_answer: null, turns: 0, tool_calls: 0, input_tokens: 0, output_tokens: 0, wall_s: 0, error: null,
  limit_hits: {}, refused_requests: {}, forged_calls: 0,
};

export type Grading =
  | { kind: 'scored'; verdict: NonNullable<Row['judge_verdict']>; reason: string; reward: 0 | 1 }
  /** The model stopped without a final answer: reward 0 without a judge call. */
  | { kind: 'unanswered' }
  /** The rollout's own content made the judge refuse to grade it (its context length, a content filter): 0, never masked. */
  | { kind: 'refused'; error: string }
  | { kind: 'masked'; failure: FailureKind; error: string; judgeFailure?: JudgeFailure };

/** One row from what is known of a rollout: its task, its summary, and its grading. */
export function buildRow(ctx: RowContext, summary: RowSummary | null, grading: Grading): Row {
  const o = summary ?? NO_SUMMARY;
  return RowSchema.parse({
    run_id: ctx.runId,
    rollout_id: ctx.rolloutId,
    task_id: ctx.task.task_id,
    repeat: ctx.repeat,
    benchmark: ctx.benchmark,
    type: ctx.task.type,
    subtype: ctx.task.subtype,
    ans_type: ctx.task.ans_type,
    expected_answer: ctx.task.gold,
    extracted_answer: o.extracted_answer,
    reward: grading.kind === 'scored' ? grading.reward : grading.kind === 'masked' ? null : 0,
    judge_verdict: grading.kind === 'scored' ? grading.verdict : null,
    judge_reason: grading.kind === 'scored' ? grading.reason : null,
    stop_reason: o.stop_reason,
    failure_kind: grading.kind === 'masked' ? grading.failure : null,
    turns: o.turns,
    tool_calls: o.tool_calls,
    input_tokens: o.input_tokens,
    output_tokens: o.output_tokens,
    wall_s: Math.round(o.wall_s * 1000) / 1000,
    policy_model: ctx.policyModel,
    judge_model: grading.kind === 'scored' || grading.kind === 'refused' || (grading.kind === 'masked' && grading.failure === 'judge_failed') ? ctx.judgeModel : null,
    error: grading.kind === 'masked' || grading.kind === 'refused' ? grading.error : (o.error ?? null),
    finished_at: new Date().toISOString(),
    limit_hits: o.limit_hits ?? {},
    refused_requests: o.refused_requests ?? {},
    forged_calls: o.forged_calls ?? 0,
    judge_failure: grading.kind === 'refused' ? 'refused_input' : grading.kind === 'masked' ? (grading.judgeFailure ?? null) : null,
  });
}
