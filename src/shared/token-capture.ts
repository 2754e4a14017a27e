/**
 * What a rollout's outcome and row say of its token capture (`policy.token_capture`): the calls, the
 * chain, and whether a trainer may use the trajectory (trajectory.ts holds the record itself).
 */
import { z } from 'zod';

/** Why a trajectory cannot be trained on (`mask_reason`). */
export const MASK_REASONS = [
  /** No answered call carried any token field: the policy server ignores them (not vLLM, or too old). */
  'server_ignored_token_fields',
  /** An answered call came back without prompt or generation token ids. */
  'missing_token_ids',
  /** An answered call came back without a log-probability per generated token. */
  'missing_logprobs',
  /** A call's prompt does not extend the previous call's prompt + generation. */
  'chain_broken',
  /** The rollout's ids went past what is kept per rollout, or the record past its size bound. */
  'over_bounds',
  /** A generation stopped at the output cap (`finish_reason: length`). */
  'output_cap',
  /** The rollout did not finish with an answer (its stop reason is not `answered`). */
  'not_finished',
  /** No call of the conversation was answered. */
  'no_calls',
] as const;
export type MaskReason = (typeof MASK_REASONS)[number];

/** What a row and an outcome carry of the token capture. */
export const TokenCaptureSummarySchema = z.object({
  /** Calls of the agent's conversation (answered or not). */
  calls: z.number().int().min(0),
  /** Every answered call's prompt extends the previous one's prompt + generation. */
  contiguous: z.boolean(),
  mask_sample: z.boolean(),
  mask_reason: z.enum(MASK_REASONS).nullable(),
});
export type TokenCaptureSummary = z.infer<typeof TokenCaptureSummarySchema>;

