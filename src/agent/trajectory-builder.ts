/**
 * A rollout's trajectory (shared/records/trajectory.ts) from what its gateway's token capture kept
 * (gateway/token-recorder.ts) and how the rollout ended: the mask and its reason, the per-call token
 * counts, the images in the order the model saw them, and the flat form over the chained calls. Pure.
 */
import type { RolloutRequest } from '../shared/ports/agent.ts';
import type { StopReason } from '../shared/scoring/stop-reasons.ts';
import { TRAJECTORY_VERSION, type MaskReason, type Trajectory } from '../shared/records/trajectory.ts';
import type { StoredImage, TokenCall, TokenCaptureRecord } from '../gateway/index.ts';

export interface TrajectoryInput {
  request: Pick<RolloutRequest, 'runId' | 'rolloutId' | 'repeat' | 'task' | 'attempt'>;
  policyModel: string;
  weightVersion: string | null;
  stopReason: StopReason;
  capture: TokenCaptureRecord;
  /** The images known by SHA-256 (the capture's own, and the gateway's for their MIME types). */
  images: ReadonlyMap<string, StoredImage>;
}

interface Flat {
  calls: number;
  prompt: number[];
  ids: number[];
  mask: Array<0 | 1>;
  logprobs: number[];
}

/** The flat form over the answered calls up to the first break of the chain (or the first without ids). */
function flatten(answered: readonly TokenCall[], breaks: ReadonlySet<number>): Flat {
  const flat: Flat = { calls: 0, prompt: [], ids: [], mask: [], logprobs: [] };
  for (const [i, c] of answered.entries()) {
    const head = i === 0 ? c.prompt_token_ids : c.inserted_token_ids;
    if ((i > 0 && breaks.has(c.index)) || !head || !c.generation_token_ids) break;
    if (i === 0) flat.prompt = [...head];
    else for (const id of head) flat.ids.push(id), flat.mask.push(0), flat.logprobs.push(0);
    c.generation_token_ids.forEach((id, k) => {
      flat.ids.push(id);
      flat.mask.push(1);
      flat.logprobs.push(c.generation_log_probs?.[k] ?? 0);
    });
    flat.calls++;
  }
  return flat;
}

/**
 * Why a trainer may not use the rollout (the first that holds, in this order), or null. Only facts the
 * model cannot cause mask: a server that returned no token fields, a capture lost on the way, a bound
 * the fleet set. How the rollout ended (no answer, timeout, context limit, agent error, the output
 * cap) never masks: it is trained on with its reward; a broken chain is `contiguous: false`.
 */
function maskOf(input: TrajectoryInput, answered: readonly TokenCall[]): { reason: MaskReason; detail: string } | null {
  const { capture } = input;
  const has = (c: TokenCall, f: string) => !c.missing.includes(f as TokenCall['missing'][number]);
  if (answered.length === 0) return { reason: 'no_calls', detail: 'no call of the conversation was answered' };
  if (answered.every((c) => c.missing.length === 3)) {
    return { reason: 'server_ignored_token_fields', detail: 'the policy server returned none of prompt_token_ids, token_ids, logprobs on any call: it ignores the fields (serve the policy with vLLM)' };
  }
  const noIds = answered.find((c) => !has(c, 'prompt_token_ids') || !has(c, 'token_ids'));
  if (noIds) return { reason: 'missing_token_ids', detail: `call ${noIds.index} came back without ${noIds.missing.filter((f) => f !== 'logprobs').join(' and ')}` };
  const noLogprobs = answered.find((c) => !has(c, 'logprobs'));
  if (noLogprobs) return { reason: 'missing_logprobs', detail: `call ${noLogprobs.index} came back without a log-probability per generated token` };
  if (capture.images_over_budget) {
    return { reason: 'images_over_budget', detail: 'the images the answered calls carried went past policy.token_capture_max_image_mib (or the image count): the prompts cannot be rebuilt; raise the bound' };
  }
  return null;
}

export function buildTrajectory(input: TrajectoryInput): Trajectory {
  const { request, capture } = input;
  const answered = capture.calls.filter((c) => c.answered);
  const flat = flatten(answered, new Set(capture.chain.breaks.map((b) => b.call)));
  const mask = maskOf(input, answered);
  const images = answered.flatMap((c) => c.images);
  const image_mimes: Record<string, string> = {};
  for (const sha of images) {
    const img = capture.images.get(sha) ?? input.images.get(sha);
    if (img) image_mimes[sha] = img.mime;
  }
  if (images.includes(request.task.image_sha256) && !image_mimes[request.task.image_sha256]) image_mimes[request.task.image_sha256] = 'image/png';
  return {
    trajectory_version: TRAJECTORY_VERSION,
    run_id: request.runId, rollout_id: request.rolloutId, task_id: request.task.task_id, repeat: request.repeat, attempt: request.attempt ?? 1,
    policy_model: input.policyModel, weight_version: input.weightVersion, stop_reason: input.stopReason, reward: null,
    mask_sample: mask !== null, mask_reason: mask?.reason ?? null, mask_detail: mask?.detail ?? null,
    chain: capture.chain,
    calls: capture.calls,
    other_calls: capture.other_calls,
    other_calls_dropped: capture.other_calls_dropped,
    turns: answered.map((c) => ({
      call: c.index,
      generated: c.generation_token_ids?.length ?? 0,
      inserted: (c.prompt_token_ids ?? c.inserted_token_ids)?.length ?? 0,
    })),
    images, image_mimes,
    flat_calls: flat.calls, prompt_ids: flat.prompt, response_ids: flat.ids, response_mask: flat.mask, response_logprobs: flat.logprobs,
    truncated: capture.over_bounds ? ['token ids past the per-rollout bound were not kept: the flat form and the calls stop at the bound'] : [],
  };
}
