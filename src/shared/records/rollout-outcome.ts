/**
 * The outcome of one rollout, defined once: what the agent runner returns, what a judge job carries,
 * what the run store keeps for rejudging, what the transcript embeds, and (with the rollout's identity
 * and its grading) what its row is made of (rows.ts). Every field has a default, so the outcome can
 * grow: a job or a record written before a field existed still parses, and a new field the agent
 * produces reaches the row by being added here.
 *
 * `response_tail` is the end of the model's text, cut once (by code point, never inside a surrogate
 * pair) to RESPONSE_TAIL_CHARS: all the judge ever sees of it; `response_truncated` says it was cut,
 * and the judge's prompt says so.
 */
import { z } from 'zod';
import { MAX_ANSWER_CHARS } from '../scoring/answer.ts';
import { SCORING_RULES } from '../scoring/rules.ts';
import { STOP_REASONS } from '../scoring/stop-reasons.ts';
import { tailChars } from '../text/cut.ts';
import { TokenCaptureSummarySchema } from './token-capture.ts';

export { STOP_REASONS, type StopReason } from '../scoring/stop-reasons.ts';

/** The judge sees at most this many characters (code points) of the model's text: its end. */
export const RESPONSE_TAIL_CHARS = 4000;

const Counts = z.record(z.string(), z.number().int().min(0));

export const RolloutOutcomeSchema = z.object({
  stop_reason: z.enum(STOP_REASONS),
  /** The final answer (shared/scoring/answer.ts: the last `Answer:` line, else the last `\boxed{}`), or null. */
  extracted_answer: z.string().max(MAX_ANSWER_CHARS).nullable().default(null),
  /** The end of the model's text (RESPONSE_TAIL_CHARS code points at most: all the judge sees). */
  response_tail: z.string().default(''),
  /** The model's text was longer than `response_tail`. */
  response_truncated: z.boolean().default(false),
  /** Answered policy calls of the agent's own conversation. */
  turns: z.number().int().min(0).default(0),
  tool_calls: z.number().int().min(0).default(0),
  input_tokens: z.number().int().min(0).default(0),
  output_tokens: z.number().int().min(0).default(0),
  wall_s: z.number().min(0).default(0),
  /** Why the rollout stopped short, for every stop reason but `answered` (never a secret). */
  error: z.string().nullable().default(null),
  /** Times the sandbox hit a resource limit, by limit (`{memory: 1}`): the model's doing, never masked. */
  limit_hits: Counts.default({}),
  /** Requests of the sandbox that the policy gateway refused, by reason (`{path: 2}`). */
  refused_requests: Counts.default({}),
  /** Chat calls that were not the agent's own conversation (made by something the model ran); they never count. */
  forged_calls: z.number().int().min(0).default(0),
  /**
   * Seconds the agent's policy calls were held by the gateway while the policy server pushed back
   * (429, 503 with Retry-After) or the fleet's pace made them wait; the task timeout does not count them.
   */
  policy_wait_s: z.number().min(0).default(0),
  /** With `policy.token_capture`: the calls, the chain and the trajectory's mask (token-capture.ts); null when off. */
  token_capture: TokenCaptureSummarySchema.nullable().default(null),
  /**
   * The scoring rules the answer was extracted by (scoring/rules.ts): 1 before the reference's rules (an
   * outcome stored or queued then, which parses with this default), SCORING_RULES for a new one.
   */
  scoring_rules: z.number().int().min(1).default(1),
});
export type RolloutOutcome = z.infer<typeof RolloutOutcomeSchema>;
/** An outcome as a producer writes it: everything but the stop reason may be left to its default. */
export type RolloutOutcomeInput = z.input<typeof RolloutOutcomeSchema>;

/** The fields of an outcome a row leaves out (the row holds no model text). */
export const OUTCOME_FIELDS_NOT_IN_ROWS = ['response_tail', 'response_truncated'] as const;

/** The outcome's `response_tail` and `response_truncated` from the model's whole text. */
export function responseTail(text: string): Pick<RolloutOutcome, 'response_tail' | 'response_truncated'> {
  const tail = tailChars(text, RESPONSE_TAIL_CHARS);
  return { response_tail: tail.text, response_truncated: tail.truncated };
}

/** An outcome from what a producer knows, every default filled; made by today's scoring rules unless it says otherwise. */
export function rolloutOutcome(input: RolloutOutcomeInput): RolloutOutcome {
  return RolloutOutcomeSchema.parse({ scoring_rules: SCORING_RULES, ...input });
}
