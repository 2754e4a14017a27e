/**
 * A trajectory as it travels through Redis: gzipped JSON within a gzipped and an uncompressed bound.
 * One over either loses its token arrays (calls' ids and the flat form), is masked `over_bounds`,
 * and says so in `truncated`: the results host always gets a record that names what happened.
 * Encoding never throws; decoding reads at most the bound and throws DataError for anything else.
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { DataError } from '../errors.ts';
import { TrajectorySchema, type Trajectory } from './trajectory.ts';

export const MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024;
export const MAX_TRAJECTORY_JSON_BYTES = 256 * 1024 * 1024;

function tryEncode(t: Trajectory, maxBytes: number, maxJsonBytes: number): Buffer | null {
  let json: string;
  try {
    json = JSON.stringify(t);
  } catch {
    return null;
  }
  if (Buffer.byteLength(json) > maxJsonBytes) return null;
  const gz = gzipSync(json);
  return gz.length <= maxBytes ? gz : null;
}

/** The record without token arrays (what is left when it does not fit). */
export function withoutTokens(t: Trajectory, note: string): Trajectory {
  return {
    ...t,
    calls: t.calls.map((c) => ({ ...c, prompt_token_ids: undefined, inserted_token_ids: undefined, generation_token_ids: null, generation_log_probs: null })),
    prompt_ids: [], response_ids: [], response_mask: [], response_logprobs: [], flat_calls: 0,
    mask_sample: true, mask_reason: 'over_bounds', mask_detail: note, truncated: [...t.truncated, note],
  };
}

export function encodeTrajectory(t: Trajectory, maxBytes = MAX_TRAJECTORY_BYTES, maxJsonBytes = MAX_TRAJECTORY_JSON_BYTES): Buffer {
  const whole = tryEncode(t, maxBytes, maxJsonBytes);
  if (whole) return whole;
  const note = `the token arrays were dropped: the record did not fit ${maxBytes} bytes gzipped and ${maxJsonBytes} bytes of JSON`;
  return gzipSync(JSON.stringify(withoutTokens(t, note)));
}

export function decodeTrajectory(gz: Buffer, maxJsonBytes = MAX_TRAJECTORY_JSON_BYTES): Trajectory {
  let json: unknown;
  try {
    json = JSON.parse(gunzipSync(gz, { maxOutputLength: maxJsonBytes }).toString('utf8'));
  } catch (err) {
    throw new DataError(`a trajectory is not gzipped JSON within ${maxJsonBytes} bytes: ${(err as Error).message}`);
  }
  const parsed = TrajectorySchema.safeParse(json);
  if (!parsed.success) throw new DataError(`a trajectory is malformed: ${parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}
