/**
 * Verdict caches keyed by what makes a verdict (SHA-256 of the judge model, the judge endpoint, the
 * judge prompt's version, the question, the gold, the extracted answer, the response tail and the exact
 * messages), so repeated rollouts with the same answer and rejudges never pay twice, and a verdict of
 * another judge is never taken for this one's. Whether a run uses it is the run's setting
 * (`judge.cache`); each verdict served from it is counted (`judge_cached` on the row). Only scored
 * verdicts are stored, never failures, and never anything secret (no key in the hash input or value).
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { VERDICTS, type Verdict } from '../../shared/scoring/verdict.ts';

export interface CachedVerdict {
  verdict: Verdict;
  reason: string;
  /** The model the judge server reported when it gave the verdict. */
  model?: string;
}

export interface JudgeCache {
  /** The cached verdict for `key`, or null. A broken entry reads as null. */
  get(key: string): Promise<CachedVerdict | null>;
  set(key: string, value: CachedVerdict): Promise<void>;
}

const CachedVerdictSchema = z.object({ verdict: z.enum(VERDICTS), reason: z.string(), model: z.string().optional() });

/** What makes a verdict: who grades (model, endpoint), by which prompt, and what it grades. */
export interface VerdictIdentity {
  /** The judge model the run names. */
  model: string;
  /** The judge endpoint, without credentials: two servers that answer to one model name are two judges. */
  endpoint: string;
  /** JUDGE_PROMPT_VERSION (prompt.ts). */
  promptVersion: number;
  question: string;
  gold: string;
  extracted: string | null;
  responseTail: string;
  /** The messages sent, exactly. */
  system: string;
  user: string;
}

/** The cache key of one judge request: hex SHA-256 of everything that makes its verdict. */
export function judgeCacheKey(what: VerdictIdentity): string {
  const { model, endpoint, promptVersion, question, gold, extracted, responseTail, system, user } = what;
  return createHash('sha256')
    .update(JSON.stringify({ v: 2, model, endpoint, promptVersion, question, gold, extracted, responseTail, system, user }))
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
      const body = JSON.stringify({ verdict: value.verdict, reason: value.reason, ...(value.model ? { model: value.model } : {}) });
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
      entries.set(key, { verdict: value.verdict, reason: value.reason, ...(value.model ? { model: value.model } : {}) });
      while (entries.size > maxEntries) entries.delete(entries.keys().next().value as string);
    },
  };
}
