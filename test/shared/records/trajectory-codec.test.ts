/**
 * A trajectory as it travels through Redis: whole when it fits; over its bound it loses its token
 * arrays and says so (masked over_bounds), never throws; decoding refuses what inflates past its bound
 * and what is not a trajectory.
 */
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { DataError } from '../../../src/shared/errors.ts';
import { decodeTrajectory, encodeTrajectory } from '../../../src/shared/records/trajectory-codec.ts';
import { TRAJECTORY_VERSION, type Trajectory } from '../../../src/shared/records/trajectory.ts';

function big(n: number): Trajectory {
  const ids = Array.from({ length: n }, (_, i) => (i * 7919) % 150_000);
  return {
    trajectory_version: TRAJECTORY_VERSION, run_id: 'r', rollout_id: 'ro', task_id: 't', repeat: 0, attempt: 1, policy_model: 'p', weight_version: null,
    stop_reason: 'answered', reward: null, mask_sample: false, mask_reason: null, mask_detail: null, chain: { contiguous: true, breaks: [] },
    calls: [{ index: 0, started_at: 'x', latency_ms: 1, status: 200, finish_reason: 'stop', answered: true, prompt_token_count: n, prompt_token_ids: ids, generation_token_ids: ids, generation_log_probs: ids.map((x) => -(x + 1) / 1e6), missing: [], sampling: {}, weight_version: null, images: [] }],
    other_calls: [], other_calls_dropped: 0, turns: [{ call: 0, generated: n, inserted: n }], images: [], image_mimes: {}, flat_calls: 1,
    prompt_ids: ids, response_ids: ids, response_mask: ids.map(() => 1), response_logprobs: ids.map((x) => -(x + 1) / 1e6), truncated: [],
  };
}

describe('trajectory codec', () => {
  it('keeps a trajectory that fits, and drops the token arrays of one that does not, masking it over_bounds', () => {
    const t = big(1000);
    expect(decodeTrajectory(encodeTrajectory(t))).toEqual(t);
    const cut = decodeTrajectory(encodeTrajectory(big(50_000), 10_000));
    expect(cut).toMatchObject({ mask_sample: true, mask_reason: 'over_bounds', prompt_ids: [], response_ids: [], flat_calls: 0 });
    expect(cut.calls[0]).toMatchObject({ generation_token_ids: null, generation_log_probs: null });
    expect(cut.truncated[0]).toMatch(/token arrays were dropped/);
  });

  it('refuses a record that inflates past its bound, or is not a trajectory', () => {
    expect(() => decodeTrajectory(gzipSync(Buffer.alloc(2_000_000, 32)), 1_000_000)).toThrow(DataError);
    expect(() => decodeTrajectory(gzipSync(JSON.stringify({ trajectory_version: 1 })))).toThrow(/malformed/);
  });
});
