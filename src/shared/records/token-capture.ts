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
  /** The record went past its size bound in Redis (trajectory-codec.ts): its token arrays were dropped. */
  'over_bounds',
  /** No call of the conversation was answered. */
  'no_calls',
  /** The images the answered calls carried went past `policy.token_capture_max_image_mib`: the trainer could not rebuild the prompts. */
  'images_over_budget',
  /** Retired (records written before they stopped masking, still read): the model can cause them, so they no longer mask. */
  'chain_broken',
  'output_cap',
  'not_finished',
] as const;
export type MaskReason = (typeof MASK_REASONS)[number];

export { RETIRED_MASK_REASONS, captureMasks } from './capture-mask.ts';

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

