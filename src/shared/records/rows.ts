/**
 * The output row: one per rollout, versioned, parsed again by the results consumer before writing.
 * A row is composed of three parts: the rollout's identity (run, task, repeat, gold), its outcome
 * (rollout-outcome.ts, less the model's text) and its grading (reward, verdict, masking). A field the
 * agent produces is added to the outcome and reaches the row from there.
 */
import { z } from 'zod';
import { OUTCOME_FIELDS_NOT_IN_ROWS, RolloutOutcomeSchema, STOP_REASONS, type RolloutOutcome } from './rollout-outcome.ts';
import { isMasked } from '../scoring/scored.ts';
import { VERDICTS, type JudgeUsage } from '../scoring/verdict.ts';
import { ROW_FAILURE_REASONS, rowFailureReason, SCORING_RULES } from '../scoring/rules.ts';
import { stringMatchReward } from '../scoring/string-match.ts';

export { isMasked, isScored } from '../scoring/scored.ts';

export const FAILURE_KINDS = ['judge_failed', 'infra_failed'] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

export const JUDGE_FAILURES = ['refused_input', 'no_verdict', 'unavailable'] as const;
export type JudgeFailure = (typeof JUDGE_FAILURES)[number];

/** The row version this code writes and reads; a row of a newer one is refused by name (row-file.ts). */
export const ROW_VERSION = 1;

/** Who the rollout is: its run, task, repeat and the task's gold answer. */
const IdentitySchema = z.object({
  row_version: z.literal(ROW_VERSION).default(ROW_VERSION),
  run_id: z.string(),
  rollout_id: z.string(),
  task_id: z.string(),
  repeat: z.number().int().min(0),
  benchmark: z.string(),
  type: z.string(),
  subtype: z.string(),
  ans_type: z.enum(['choice', 'blank']),
  expected_answer: z.string(),
  policy_model: z.string(),
  /** The trainer's weight version the rollout ran with (its request's `policy.weight_version`, or the run's); absent when none was given. */
  weight_version: z.string().optional(),
});

const OMITTED = Object.fromEntries(OUTCOME_FIELDS_NOT_IN_ROWS.map((k) => [k, true])) as { [K in (typeof OUTCOME_FIELDS_NOT_IN_ROWS)[number]]: true };

/** What the rollout did: its outcome without the model's text; no stop reason when its infrastructure failed. */
const RowOutcomeSchema = RolloutOutcomeSchema.omit(OMITTED).extend({ stop_reason: z.enum(STOP_REASONS).nullable() });

/** How it was graded. */
const GradingSchema = z.object({
  /** 1 or 0; null when masked (`failure_kind` set). */
  reward: z.union([z.literal(0), z.literal(1)]).nullable(),
  judge_verdict: z.enum(VERDICTS).nullable(),
  judge_reason: z.string().nullable(),
  judge_model: z.string().nullable(),
  failure_kind: z.enum(FAILURE_KINDS).nullable(),
  /**
   * Why the judge gave no verdict, when it did not: `refused_input` (the rollout's own content made the
   * judge refuse it: its context length, a content filter; scored 0), `no_verdict` (a reply without a
   * valid verdict, after one more try; masked) or `unavailable` (the judge failed; masked).
   */
  judge_failure: z.enum(JUDGE_FAILURES).nullable().default(null),
  /** Why the row is masked or the agent failed (no secrets). */
  error: z.string().nullable().default(null),
  /** When the row was made (ISO 8601). */
  finished_at: z.string(),
  /** The rollout's transcript record, relative to the JSONL's folder; null when none was kept. */
  transcript: z.string().nullable().default(null),
  /** The rollout's trajectory (trajectory.ts), relative to the JSONL's folder; null when none was kept. */
  trajectory: z.string().nullable().default(null),
  /**
   * The extracted answer graded against the gold by the reference's string-match rules
   * (string-match.ts): 1, 0.98 (numbers within ~1%) or 0 (0 when nothing was extracted). A diagnostic
   * beside `reward`, never the reward.
   */
  string_match_reward: z.number().min(0).max(1),
  /** The reference's name for why the row is not a 1 (scoring/rules.ts `rowFailureReason`); null for a 1. */
  failure_reason: z.enum(ROW_FAILURE_REASONS).nullable(),
  /** Tokens the judge's replies counted for this row's grading (`usage.prompt_tokens`); 0 for a cached verdict, no call, or a row older than the field. */
  judge_input_tokens: z.number().int().min(0).default(0),
  /** Tokens of the judge's replies (`usage.completion_tokens`); 0 as `judge_input_tokens`. */
  judge_output_tokens: z.number().int().min(0).default(0),
  /** The verdict came from the judge cache (judge-cache.ts: same judge, prompt and answer graded before), not from a call; false for a row older than the field. */
  judge_cached: z.boolean().default(false),
});

const RowObjectSchema = IdentitySchema.extend(RowOutcomeSchema.shape).extend(GradingSchema.shape);

/**
 * A row written before `string_match_reward` and `failure_reason` existed gets them as they are
 * derived from its other fields (both are pure functions of them), so old rows still parse.
 */
function withDerivedFields(value: unknown): unknown {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return value;
  const row = value as Record<string, unknown>;
  if ('string_match_reward' in row && 'failure_reason' in row) return value;
  const text = (v: unknown) => (typeof v === 'string' ? v : null);
  return {
    string_match_reward: stringMatchReward(text(row.expected_answer) ?? '', text(row.extracted_answer)),
    failure_reason: rowFailureReason({
      reward: typeof row.reward === 'number' ? row.reward : null, failure_kind: text(row.failure_kind),
      judge_verdict: text(row.judge_verdict), judge_failure: text(row.judge_failure),
    }),
    ...row,
  };
}

export const RowSchema = z.preprocess(withDerivedFields, RowObjectSchema);
export type Row = z.infer<typeof RowObjectSchema>;

/**
 * Which of two rows for the same rollout stands: the first one, unless it is masked and the new one
 * differs (a rejudge or a retried rollout replaces its masked row), or the new one was graded by
 * newer scoring rules (a rescore). Duplicate deliveries of a scored
 * row never change it, so every rollout ends with exactly one stable row.
 */
export function shouldReplace(existing: Row, incoming: Row): boolean {
  // A row graded again by newer scoring rules (`vcfleet rejudge --rescore`) replaces one of older rules.
  if (incoming.scoring_rules > existing.scoring_rules) return true;
  if (!isMasked(existing)) return false;
  return JSON.stringify({ ...existing, finished_at: '' }) !== JSON.stringify({ ...incoming, finished_at: '' });
}

/** What a row needs to know of its run and task (its identity). */
export interface RowContext {
  runId: string;
  benchmark: string;
  policyModel: string;
  /** The weight version the rollout ran with; null or absent: none given. */
  weightVersion?: string | null;
  judgeModel: string | null;
  rolloutId: string;
  repeat: number;
  task: { task_id: string; type: string; subtype: string; ans_type: 'choice' | 'blank'; gold: string };
}

export type Grading =
  | { kind: 'scored'; verdict: NonNullable<Row['judge_verdict']>; reason: string; reward: 0 | 1; cached?: boolean }
  /** 0 without a judge call: the run did not complete, or left no text (scoring/rules.ts `gradingPlan`). */
  | { kind: 'unanswered' }
  /** The rollout's own content made the judge refuse to grade it (its context length, a content filter): 0, never masked. */
  | { kind: 'refused'; error: string }
  | { kind: 'masked'; failure: FailureKind; error: string; judgeFailure?: JudgeFailure };

/** The row's outcome part: the outcome without the model's text (no outcome: an infrastructure failure). */
function outcomePart(outcome: RolloutOutcome | null): z.input<typeof RowOutcomeSchema> {
  if (outcome === null) return { stop_reason: null };
  const part: Record<string, unknown> = { ...outcome };
  for (const k of OUTCOME_FIELDS_NOT_IN_ROWS) delete part[k];
  return part as z.input<typeof RowOutcomeSchema>;
}

/**
 * One row from what is known of a rollout: its identity, its outcome (null when none), its grading,
 * and the tokens the judge counted for that grading (none: no call, or a cached verdict).
 */
export function buildRow(ctx: RowContext, outcome: RolloutOutcome | null, grading: Grading, judgeUsage?: JudgeUsage): Row {
  const judged = grading.kind === 'scored' || grading.kind === 'refused' || (grading.kind === 'masked' && grading.failure === 'judge_failed');
  const reward = grading.kind === 'scored' ? grading.reward : grading.kind === 'masked' ? null : 0;
  const failure_kind = grading.kind === 'masked' ? grading.failure : null;
  const judge_verdict = grading.kind === 'scored' ? grading.verdict : null;
  const judge_failure = grading.kind === 'refused' ? 'refused_input' : grading.kind === 'masked' ? (grading.judgeFailure ?? null) : null;
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
    policy_model: ctx.policyModel,
    ...(ctx.weightVersion ? { weight_version: ctx.weightVersion } : {}),
    ...outcomePart(outcome),
    scoring_rules: outcome?.scoring_rules ?? SCORING_RULES,
    wall_s: Math.round((outcome?.wall_s ?? 0) * 1000) / 1000,
    reward,
    judge_verdict,
    judge_reason: grading.kind === 'scored' ? grading.reason : null,
    judge_model: judged ? ctx.judgeModel : null,
    failure_kind,
    judge_failure,
    string_match_reward: stringMatchReward(ctx.task.gold, outcome?.extracted_answer ?? null),
    failure_reason: rowFailureReason({ reward, failure_kind, judge_verdict, judge_failure }),
    error: grading.kind === 'masked' || grading.kind === 'refused' ? grading.error : (outcome?.error ?? null),
    judge_input_tokens: judgeUsage?.input_tokens ?? 0,
    judge_output_tokens: judgeUsage?.output_tokens ?? 0,
    judge_cached: grading.kind === 'scored' && grading.cached === true,
    finished_at: new Date().toISOString(),
  });
}
