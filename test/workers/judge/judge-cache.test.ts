/** Verdict caches: in memory and in Redis (real Redis on 127.0.0.1:6379, a unique prefix per test). */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigSchema, type Config } from '../../../src/shared/config/load.ts';
import type { JudgeInput } from '../../../src/shared/ports/judge.ts';
import {
  createMemoryJudgeCache, createRedisJudgeCache, judgeCacheKey, redisJudgeCacheKey, type JudgeCache,
} from '../../../src/workers/judge/judge-cache.ts';
import { createJudge } from '../../../src/workers/judge/openai-judge.ts';
import { buildJudgePrompt, JUDGE_PROMPT_VERSION } from '../../../src/workers/judge/prompt.ts';
import { startScriptedJudgeServer, type ScriptedJudgeServer } from '../../helpers/scripted-judge-server.ts';
import { deletePrefix } from '../../helpers/redis-keys.ts';

const SECRET = 'sk-test-SECRET-123';
const input: JudgeInput = { question: 'How many dots?', expectedAnswer: '4', extractedAnswer: '4', responseText: '\\boxed{4}' };

let server: ScriptedJudgeServer;
let redis: Redis;
let prefix: string;

beforeAll(async () => {
  server = await startScriptedJudgeServer();
  redis = new Redis({ host: '127.0.0.1', port: 6379, lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
});
afterAll(async () => {
  await server.close();
  await redis.quit();
});
beforeEach(() => {
  prefix = `vcftest-${randomUUID()}`;
  server.setScript([]);
  server.requests.length = 0;
});
afterEach(() => deletePrefix(redis, prefix));

function makeConfig(judge: Record<string, unknown> = {}, model = 'judge-model'): Config {
  return ConfigSchema.parse({
    visual_coding_opencode_judge_base_url: server.url,
    visual_coding_opencode_judge_model_name: model,
    judge: { api_key: SECRET, timeout_s: 5, max_retries: 1, backoff_base_ms: 5, backoff_max_ms: 10, ...judge },
  });
}

function makeJudge(cache: JudgeCache, judge: Record<string, unknown> = {}, model?: string) {
  const lines: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (l: string) => void lines.push(l) });
  return { judge: createJudge({ config: makeConfig(judge, model), logger, cache }), lines };
}

/** The key of `input` as the judge computes it. */
function keyOf(i: JudgeInput, model = 'judge-model', endpoint = server.url): string {
  const p = buildJudgePrompt(i);
  return judgeCacheKey({
    model, endpoint, promptVersion: JUDGE_PROMPT_VERSION, question: i.question, gold: i.expectedAnswer,
    extracted: i.extractedAnswer, responseTail: i.responseText, system: p.system, user: p.user,
  });
}

describe('judgeCacheKey', () => {
  it('depends on the judge model, its endpoint, the prompt version, and each part of what is graded', () => {
    const k = keyOf(input);
    expect(k).toMatch(/^[0-9a-f]{64}$/);
    expect(keyOf({ ...input })).toBe(k);
    expect(keyOf(input, 'm2')).not.toBe(k);
    expect(keyOf(input, 'judge-model', 'http://127.0.0.1:1/v1')).not.toBe(k);
    for (const other of [{ extractedAnswer: '5' }, { expectedAnswer: '5' }, { question: 'How many?' }, { responseText: 'so \\boxed{5}' }]) {
      expect(keyOf({ ...input, ...other })).not.toBe(k);
    }
    const p = buildJudgePrompt(input);
    const base = { model: 'm', endpoint: 'e', question: 'q', gold: 'g', extracted: 'a', responseTail: 't', system: p.system, user: p.user };
    expect(judgeCacheKey({ ...base, promptVersion: 1 })).not.toBe(judgeCacheKey({ ...base, promptVersion: 2 }));
  });
});

describe('in-memory cache', () => {
  it('a second identical grading makes no HTTP call', async () => {
    const cache = createMemoryJudgeCache();
    const { judge } = makeJudge(cache);
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'equivalent', cached: false });
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'equivalent', reason: 'the answers match', reward: 1, cached: true });
    expect(server.requests).toHaveLength(1);
    await judge.grade({ ...input, extractedAnswer: '5' });
    expect(server.requests).toHaveLength(2);
  });

  it('never stores failures, so a rejudge calls the endpoint again', async () => {
    const cache = createMemoryJudgeCache();
    server.setScript([{ status: 500 }, { status: 500 }, { verdict: 'banana' }, { verdict: 'banana' }, { verdict: 'different' }]);
    const { judge } = makeJudge(cache);
    expect(await judge.grade(input)).toMatchObject({ status: 'failed', kind: 'unavailable' });
    expect(await judge.grade(input)).toMatchObject({ status: 'failed', kind: 'no_verdict' });
    expect(cache.size).toBe(0);
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'different', cached: false });
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'different', cached: true });
    expect(server.requests).toHaveLength(5);
  });

  it('is ignored when judge.cache is false', async () => {
    const { judge } = makeJudge(createMemoryJudgeCache(), { cache: false });
    await judge.grade(input);
    expect(await judge.grade(input)).toMatchObject({ cached: false });
    expect(server.requests).toHaveLength(2);
  });

  it('drops the oldest entries beyond maxEntries', async () => {
    const cache = createMemoryJudgeCache(2);
    for (const k of ['a', 'b', 'c']) await cache.set(k, { verdict: 'unsure', reason: k });
    expect(cache.size).toBe(2);
    expect(await cache.get('a')).toBeNull();
    expect(await cache.get('c')).toEqual({ verdict: 'unsure', reason: 'c' });
  });
});

describe('Redis cache', () => {
  it('is shared by two judge instances and stores no secret', async () => {
    const first = makeJudge(createRedisJudgeCache(redis, prefix));
    const second = makeJudge(createRedisJudgeCache(redis, prefix));
    expect(await first.judge.grade(input)).toMatchObject({ status: 'scored', cached: false });
    expect(await second.judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'equivalent', reward: 1, cached: true });
    expect(server.requests).toHaveLength(1);

    const keys = await redis.keys(`${prefix}:*`);
    const expectedKey = redisJudgeCacheKey(prefix, keyOf(input));
    expect(keys).toEqual([expectedKey]);
    expect(keys[0]).toMatch(new RegExp(`^${prefix}:judge-cache:[0-9a-f]{64}$`));
    const values = await Promise.all(keys.map((k) => redis.get(k)));
    for (const text of [...keys, ...values]) expect(text).not.toContain(SECRET);
    expect(JSON.parse(values[0]!)).toEqual({ verdict: 'equivalent', reason: 'the answers match', model: 'judge-model' });
    for (const line of [...first.lines, ...second.lines]) expect(line).not.toContain(SECRET);
  });

  it('a different judge model does not reuse the entry', async () => {
    await makeJudge(createRedisJudgeCache(redis, prefix)).judge.grade(input);
    expect(await makeJudge(createRedisJudgeCache(redis, prefix), {}, 'other-model').judge.grade(input)).toMatchObject({ cached: false });
    expect(server.requests).toHaveLength(2);
  });

  it('never stores failures', async () => {
    server.setScript(() => ({ status: 503 }));
    const { judge } = makeJudge(createRedisJudgeCache(redis, prefix));
    expect(await judge.grade(input)).toMatchObject({ status: 'failed' });
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
  });

  it('sets a TTL when asked and reads a broken entry as a miss', async () => {
    const cache = createRedisJudgeCache(redis, prefix, 60);
    await cache.set('k', { verdict: 'different', reason: 'r' });
    const ttl = await redis.ttl(redisJudgeCacheKey(prefix, 'k'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60);
    await redis.set(redisJudgeCacheKey(prefix, 'bad'), '{"verdict":"maybe"}');
    expect(await cache.get('bad')).toBeNull();
    expect(await cache.get('missing')).toBeNull();
  });

  it('a failing cache does not fail the grading', async () => {
    const broken: JudgeCache = {
      get: async () => { throw new Error('redis down'); },
      set: async () => { throw new Error('redis down'); },
    };
    const { judge, lines } = makeJudge(broken);
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', cached: false });
    expect(lines.filter((l) => l.includes('judge_cache_error'))).toHaveLength(2);
  });
});
