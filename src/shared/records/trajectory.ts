/**
 * The trajectory of one rollout, for RL training: every policy call of the agent's conversation with
 * the token ids the inference engine saw and generated and the generation's log-probabilities (NeMo
 * Gym's per-call names), the chain check, whether a trainer may use it (`mask_sample`, with a
 * reason), and the flat form trainers consume. Built by the sandbox-worker from what its gateway saw
 * (never from anything the sandbox prints), it travels through Redis gzipped within a bound
 * (trajectory-codec.ts) and lands beside the run's JSONL:
 *
 *   <stem>_trajectories/<rollout file stem>.json   this record (row field `trajectory`)
 *   <stem>_transcripts/images/<sha256>.<ext>       the images, once each, with the transcripts'
 *
 * The flat form: `prompt_ids` is the first call's prompt; `response_ids` is everything after it, call
 * by call: the generation (mask 1, its log-probabilities) and then the tokens the environment inserted
 * before the next call (tool output, images, prompts: mask 0, log-probability 0). It covers the calls
 * up to the first break of the chain (`flat_calls` of them). Per call, `prompt_token_ids` is kept in
 * full for the first call and for a call that breaks the chain; otherwise a call's prompt is the
 * previous call's prompt + `generation_token_ids` + its own `inserted_token_ids`.
 */
import path from 'node:path';
import { z } from 'zod';
import { MASK_REASONS, type TokenCaptureSummary } from './token-capture.ts';
import { safeFileStem } from './transcript.ts';

export { MASK_REASONS, RETIRED_MASK_REASONS, TokenCaptureSummarySchema, captureMasks, type MaskReason, type TokenCaptureSummary } from './token-capture.ts';

export const TRAJECTORY_VERSION = 1;

const Ids = z.array(z.number().int().min(0));
const Logprobs = z.array(z.number());

const CallSchema = z.object({
  index: z.number().int().min(0),
  started_at: z.string(),
  latency_ms: z.number().min(0),
  status: z.number().int().nullable(),
  finish_reason: z.string().nullable(),
  answered: z.boolean(),
  prompt_token_count: z.number().int().min(0).nullable(),
  prompt_token_ids: Ids.optional(),
  inserted_token_ids: Ids.optional(),
  generation_token_ids: Ids.nullable(),
  generation_log_probs: Logprobs.nullable(),
  missing: z.array(z.string()),
  sampling: z.record(z.string(), z.unknown()),
  weight_version: z.string().nullable(),
  images: z.array(z.string()),
});
export type TrajectoryCall = z.infer<typeof CallSchema>;

export const TrajectorySchema = z.object({
  trajectory_version: z.literal(TRAJECTORY_VERSION),
  run_id: z.string(),
  rollout_id: z.string(),
  task_id: z.string(),
  repeat: z.number().int().min(0),
  attempt: z.number().int().min(1),
  policy_model: z.string(),
  weight_version: z.string().nullable(),
  stop_reason: z.string(),
  /** The row's reward once judged (null until then, and for a masked row). */
  reward: z.union([z.literal(0), z.literal(1)]).nullable(),
  mask_sample: z.boolean(),
  mask_reason: z.enum(MASK_REASONS).nullable(),
  /** The reason in words: which call, which field, where the chain broke. */
  mask_detail: z.string().nullable(),
  chain: z.object({
    contiguous: z.boolean(),
    breaks: z.array(z.object({ call: z.number().int(), token: z.number().int().nullable(), why: z.string() })),
  }),
  calls: z.array(CallSchema),
  /** Calls that were not the agent's conversation (forged by something the model ran): never in the chain. */
  other_calls: z.array(z.object({ index: z.number().int(), origin: z.string(), status: z.number().int().nullable(), latency_ms: z.number() })),
  other_calls_dropped: z.number().int().min(0),
  /** Per answered call: tokens it generated, and tokens the environment inserted before it (the whole prompt for the first). */
  turns: z.array(z.object({ call: z.number().int(), generated: z.number().int().min(0), inserted: z.number().int().min(0) })),
  /** The images in the order the model saw them (SHA-256; files in the transcripts' images folder). */
  images: z.array(z.string()),
  image_mimes: z.record(z.string(), z.string()),
  flat_calls: z.number().int().min(0),
  prompt_ids: Ids,
  response_ids: Ids,
  response_mask: z.array(z.union([z.literal(0), z.literal(1)])),
  response_logprobs: Logprobs,
  /** What was dropped to keep the record within its bounds. */
  truncated: z.array(z.string()),
});
export type Trajectory = z.infer<typeof TrajectorySchema>;

/** The `trajectory` field of a row: the record's path relative to the JSONL's folder. */
export function trajectoryRelPath(outputJsonl: string, rolloutId: string): string {
  const stem = path.basename(outputJsonl).replace(/\.jsonl$/, '');
  return `${stem}_trajectories/${safeFileStem(rolloutId)}.json`;
}

export function tokenCaptureSummary(t: Pick<Trajectory, 'calls' | 'chain' | 'mask_sample' | 'mask_reason'>): TokenCaptureSummary {
  return { calls: t.calls.length, contiguous: t.chain.contiguous, mask_sample: t.mask_sample, mask_reason: t.mask_reason };
}
