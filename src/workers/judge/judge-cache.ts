/**
 * Verdict caches keyed by judge model and the exact prompt (SHA-256), so repeated rollouts with the
 * same answer and rejudges never pay twice. Only scored verdicts are stored, never failures, and
 * never anything secret (the key is not part of the hash input or the value).
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { VERDICTS, type Verdict } from '../../shared/scoring/verdict.ts';

export interface CachedVerdict {
  verdict: Verdict;
  reason: string;
}

export interface JudgeCache {
  /** The cached verdict for `key`, or null. A broken entry reads as null. */
  get(key: string): Promise<CachedVerdict | null>;
  set(key: string, value: CachedVerdict): Promise<void>;
}

const CachedVerdictSchema = z.object({ verdict: z.enum(VERDICTS), reason: z.string() });

/** The cache key of one judge request: hex SHA-256 of the judge model and both prompt messages. */
export function judgeCacheKey(model: string, prompt: { system: string; user: string }): string {
  return createHash('sha256')
    .update(JSON.stringify({ model, system: prompt.system, user: prompt.user }))
    .digest('hex');
}

/** The Redis key of a cache entry: `<prefix>:judge-cache:<sha256>`. */
export function redisJudgeCacheKey(prefix: string, key: string): string {
  return `${prefix}:judge-cache:${key}`;
}

function decode(raw: string | null): CachedVerdict | null {
  if (raw === null) return null;
  try {
    const parsed = CachedVerdictSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/**
 * A cache shared by every judge worker through Redis. The caller owns `redis` (and closes it).
 * @param prefix the fleet's key prefix (e.g. `vcfleet`); entries live at `<prefix>:judge-cache:<sha256>`.
 * @param ttlS lifetime of an entry in seconds; default: no expiry.
 */
export function createRedisJudgeCache(redis: Redis, prefix: string, ttlS?: number): JudgeCache {
  return {
    async get(key) {
      return decode(await redis.get(redisJudgeCacheKey(prefix, key)));
    },
    async set(key, value) {
      const body = JSON.stringify({ verdict: value.verdict, reason: value.reason });
      const redisKey = redisJudgeCacheKey(prefix, key);
      if (ttlS !== undefined && ttlS > 0) await redis.set(redisKey, body, 'EX', Math.ceil(ttlS));
      else await redis.set(redisKey, body);
    },
  };
}

/**
 * A cache for a single process (tests, local runs without shared Redis).
 * @param maxEntries oldest entries are dropped beyond this many; default 10000.
 */
export function createMemoryJudgeCache(maxEntries = 10_000): JudgeCache & { readonly size: number } {
  const entries = new Map<string, CachedVerdict>();
  return {
    get size() {
      return entries.size;
    },
    async get(key) {
      return entries.get(key) ?? null;
    },
    async set(key, value) {
      entries.delete(key);
      entries.set(key, { verdict: value.verdict, reason: value.reason });
      while (entries.size > maxEntries) entries.delete(entries.keys().next().value as string);
    },
  };
}
