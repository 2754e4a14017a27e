/**
 * The per-call records of a trajectory (`vcfleet export --format steps`): one record per answered
 * call, each with the prompt's token ids as the policy server saw them, the generated ids and their
 * log-probabilities, the images of the prompt, and the rollout's reward and mask. A chain that broke
 * loses nothing here: each call stands alone (NeMo RL's per-step form), where the flat form
 * (token-record.ts) keeps only the contiguous prefix. The trajectory keeps a call's whole prompt
 * only where the chain broke; elsewhere it is rebuilt as the previous prompt + generation + the
 * inserted ids. Pure.
 */
import type { Row } from '../records/rows.ts';
import type { Trajectory } from '../records/trajectory.ts';
import { maskOf, type TrainingMask } from './training-mask.ts';

export interface StepRecord {
  run_id: string;
  rollout_id: string;
  task_id: string;
  repeat: number;
  weight_version: string | null;
  /** The call's index in the rollout's calls, and its place among the answered calls (0-based). */
  call: number;
  step: number;
  /** Answered calls of the rollout (every one has a record, unless its ids were not kept). */
  steps: number;
  prompt_token_ids: number[];
  generation_token_ids: number[];
  generation_log_probs: number[];
  finish_reason: string | null;
  /** This call's prompt extends the previous call's prompt + generation (the first call: true). */
  extends_previous: boolean;
  /** The image files of this call's prompt, in order (paths as `imagePath` gave them). */
  images: string[];
  sampling: Record<string, unknown>;
  /** The rollout's reward (1 or 0); null for a masked row. */
  reward: number | null;
  mask_sample: boolean;
  mask_reason: TrainingMask['reason'];
}

export type StepRecordsResult = { ok: true; records: StepRecord[]; truncated: boolean } | { ok: false; problem: string; missingImage?: boolean };

/**
 * The step records of a row's trajectory. A call whose ids were not kept (past the capture's bound)
 * ends the records there (`truncated`); an image without a file, or a trajectory of another rollout,
 * is a problem, never a record.
 */
export function stepRecords(row: Row, t: Trajectory, imagePath: (sha256: string) => string | null): StepRecordsResult {
  if (t.run_id !== row.run_id || t.rollout_id !== row.rollout_id) return { ok: false, problem: `the trajectory is of rollout ${t.rollout_id} of run ${t.run_id}, not this one` };
  const answered = t.calls.filter((c) => c.answered);
  const breaks = new Set(t.chain.breaks.map((b) => b.call));
  const mask = maskOf(row, t);
  const reward = row.failure_kind === null ? row.reward : null;
  const records: StepRecord[] = [];
  const images: string[] = [];
  let tip: number[] | null = null;
  for (const [step, c] of answered.entries()) {
    const prompt: number[] | null = c.prompt_token_ids ?? (tip && c.inserted_token_ids ? [...tip, ...c.inserted_token_ids] : null);
    if (!prompt || !c.generation_token_ids) return { ok: true, records, truncated: true };
    for (const sha of c.images) {
      const file = imagePath(sha);
      if (file === null) return { ok: false, problem: `image ${sha} of call ${c.index} has no file in the transcripts' images folder`, missingImage: true };
      images.push(file);
    }
    const logprobs = c.generation_log_probs ?? [];
    if (logprobs.length !== c.generation_token_ids.length) return { ok: false, problem: `call ${c.index} has ${c.generation_token_ids.length} generated ids and ${logprobs.length} log-probabilities` };
    records.push({
      run_id: row.run_id, rollout_id: row.rollout_id, task_id: row.task_id, repeat: row.repeat, weight_version: c.weight_version ?? t.weight_version,
      call: c.index, step, steps: answered.length, prompt_token_ids: prompt, generation_token_ids: c.generation_token_ids, generation_log_probs: logprobs,
      finish_reason: c.finish_reason, extends_previous: step === 0 || !breaks.has(c.index), images: [...images], sampling: c.sampling,
      reward, mask_sample: mask.mask_sample, mask_reason: mask.reason,
    });
    tip = [...prompt, ...c.generation_token_ids];
  }
  return { ok: true, records, truncated: false };
}
