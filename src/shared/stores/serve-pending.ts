/**
 * The bound of a `vcfleet serve` run: its requests accepted and not finished, and the image bytes
 * they keep in Redis, counted in Redis (every serve process of the run shares the count) by two Lua
 * scripts. `admit` takes a rollout in when the run has room (`serve.max_pending`,
 * `serve.max_pending_image_mib`), else counts the refusal by reason; `release` lets it go once its
 * response is left for serve (the results consumer) or it was never made (a failed accept). Both are
 * idempotent per rollout: a request asked again, or a row delivered twice, counts once.
 */
import type { Redis } from 'ioredis';
import { fleetKeys, type FleetKeys } from '../redis/keys.ts';

export const REFUSAL_REASONS = ['max_pending', 'image_budget'] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export type Admission = { admitted: true } | { admitted: false; reason: RefusalReason; pending: number; imageBytes: number };

/** One pending rollout, as the run's pending hash keeps it. */
export interface PendingEntry {
  rolloutId: string;
  ngRolloutId: string;
  weightVersion: string | null;
  imageBytes: number;
  /** When it was admitted (epoch ms; 0 when unknown). */
  admittedAt?: number;
}

export interface PendingCounts {
  pending: number;
  image_bytes: number;
  refused: Record<RefusalReason, number>;
}

// KEYS: pending hash, bytes total, refused hash, serve runs set. ARGV: rollout id, entry JSON, bytes, max pending, max bytes, run id.
const ADMIT = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return {1, 0, 0} end
local n = redis.call('HLEN', KEYS[1])
local b = tonumber(redis.call('GET', KEYS[2]) or '0')
if n >= tonumber(ARGV[4]) then
  redis.call('HINCRBY', KEYS[3], 'max_pending', 1)
  return {0, n, b}
end
if b + tonumber(ARGV[3]) > tonumber(ARGV[5]) then
  redis.call('HINCRBY', KEYS[3], 'image_budget', 1)
  return {-1, n, b}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('INCRBY', KEYS[2], ARGV[3])
redis.call('SADD', KEYS[4], ARGV[6])
return {1, n + 1, b + tonumber(ARGV[3])}
`;

// KEYS: pending hash, bytes total. ARGV: rollout id.
const RELEASE = `
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
local left = redis.call('DECRBY', KEYS[2], cjson.decode(v).b)
if left < 0 then redis.call('SET', KEYS[2], 0) end
return 1
`;

export class ServePending {
  readonly keys: FleetKeys;

  constructor(readonly redis: Redis, prefix: string) {
    this.keys = fleetKeys(prefix);
  }

  async admit(runId: string, entry: PendingEntry, limits: { maxPending: number; maxImageBytes: number }): Promise<Admission> {
    const k = this.keys;
    const json = JSON.stringify({ b: entry.imageBytes, w: entry.weightVersion, id: entry.ngRolloutId, t: Date.now() });
    const [ok, pending, bytes] = (await this.redis.eval(
      ADMIT, 4, k.servePending(runId), k.servePendingBytes(runId), k.serveRefused(runId), k.serveRuns(),
      entry.rolloutId, json, entry.imageBytes, limits.maxPending, limits.maxImageBytes, runId,
    )) as [number, number, number];
    if (ok === 1) return { admitted: true };
    return { admitted: false, reason: ok === 0 ? 'max_pending' : 'image_budget', pending, imageBytes: bytes };
  }

  /** Let a rollout go; false when it was not pending (released before, or never admitted). */
  async release(runId: string, rolloutId: string): Promise<boolean> {
    return (await this.redis.eval(RELEASE, 2, this.keys.servePending(runId), this.keys.servePendingBytes(runId), rolloutId)) === 1;
  }

  /** The run's pending rollouts (at most `serve.max_pending` of them). */
  async entries(runId: string): Promise<PendingEntry[]> {
    const all = await this.redis.hgetall(this.keys.servePending(runId));
    return Object.entries(all).flatMap(([rolloutId, v]) => {
      try {
        const e = JSON.parse(v) as { b: number; w: string | null; id: string; t?: number };
        return [{ rolloutId, ngRolloutId: e.id, weightVersion: e.w, imageBytes: e.b, admittedAt: e.t ?? 0 }];
      } catch {
        return [];
      }
    });
  }

  async counts(runId: string): Promise<PendingCounts> {
    const k = this.keys;
    const [pending, bytes, refused] = await Promise.all([this.redis.hlen(k.servePending(runId)), this.redis.get(k.servePendingBytes(runId)), this.redis.hgetall(k.serveRefused(runId))]);
    return {
      pending,
      image_bytes: Math.max(0, Number(bytes ?? 0)),
      refused: Object.fromEntries(REFUSAL_REASONS.map((r) => [r, Number(refused[r] ?? 0)])) as Record<RefusalReason, number>,
    };
  }

  async runs(): Promise<string[]> {
    return this.redis.smembers(this.keys.serveRuns());
  }
}
