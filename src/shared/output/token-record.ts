/**
 * The flat token record of verl/SkyRL/Atropos-style loaders (`vcfleet export --format tokens`): a
 * row's trajectory in its flat form (trajectory.ts), with the row's reward and whether a trainer may
 * use it (training-mask.ts). Pure: the same inputs give the same output.
 */
import type { Row } from '../records/rows.ts';
import type { Trajectory } from '../records/trajectory.ts';
import { maskOf, type TrainingMask } from './training-mask.ts';

/** The flat token record of verl/SkyRL/Atropos-style loaders (trajectory.ts's flat form). */
export interface TokenRecord {
  run_id: string;
  rollout_id: string;
  task_id: string;
  repeat: number;
  weight_version: string | null;
  prompt_ids: number[];
  response_ids: number[];
  /** 1 for generated tokens, 0 for tokens the environment inserted. */
  response_mask: Array<0 | 1>;
  /** 0 where the mask is 0. */
  response_logprobs: number[];
  /** 1 or 0; null for a masked row (kept only on request). */
  reward: number | null;
  /** The image files of the calls in the flat form, in the order the model saw them (paths as `imagePath` gave them). */
  images: string[];
  /** Calls the flat form covers (up to the first break of the chain). */
  flat_calls: number;
  /** The flat form covers every answered call: no break of the chain, nothing cut at the capture's bound. */
  contiguous: boolean;
  /** The capture stopped keeping ids at its bound: the record covers the rollout up to it. */
  truncated: boolean;
  mask_sample: boolean;
  /** Why it cannot be trained on (training-mask.ts): the row's failure kind, a missing reward, the trajectory's mask reason; null when it can. */
  mask_reason: TrainingMask['reason'];
}

export type TokenRecordResult = { ok: true; record: TokenRecord } | { ok: false; problem: string; missingImage?: boolean };

/**
 * The flat token record of a row's trajectory. `imagePath` gives the file of an image by SHA-256 (null
 * when there is none); a record whose images are not all on disk, whose trajectory is another
 * rollout's, or whose flat arrays disagree in length is a problem, never a record.
 */
export function tokenRecord(row: Row, t: Trajectory, imagePath: (sha256: string) => string | null): TokenRecordResult {
  if (t.run_id !== row.run_id || t.rollout_id !== row.rollout_id) return { ok: false, problem: `the trajectory is of rollout ${t.rollout_id} of run ${t.run_id}, not this one` };
  const n = t.response_ids.length;
  if (t.response_mask.length !== n || t.response_logprobs.length !== n) {
    return { ok: false, problem: `response_ids, response_mask and response_logprobs differ in length (${n}, ${t.response_mask.length}, ${t.response_logprobs.length})` };
  }
  const images: string[] = [];
  for (const call of t.calls.filter((c) => c.answered).slice(0, t.flat_calls)) {
    for (const sha of call.images) {
      const file = imagePath(sha);
      if (file === null) return { ok: false, problem: `image ${sha} of call ${call.index} has no file in the transcripts' images folder`, missingImage: true };
      images.push(file);
    }
  }
  const mask = maskOf(row, t);
  const answered = t.calls.filter((c) => c.answered).length;
  const truncated = t.truncated.length > 0;
  return {
    ok: true,
    record: {
      run_id: row.run_id, rollout_id: row.rollout_id, task_id: row.task_id, repeat: row.repeat, weight_version: t.weight_version,
      prompt_ids: t.prompt_ids, response_ids: t.response_ids, response_mask: t.response_mask, response_logprobs: t.response_logprobs,
      reward: row.failure_kind === null ? row.reward : null, images, flat_calls: t.flat_calls,
      contiguous: t.chain.contiguous && !truncated && t.flat_calls === answered, truncated, mask_sample: mask.mask_sample, mask_reason: mask.reason,
    },
  };
}
