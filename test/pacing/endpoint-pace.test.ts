/**
 * The fleet's pace through a real Redis: two workers' paces of one endpoint share one
 * requests-per-minute limit and one push-back hold, learn a rate from the endpoint's 429s, and
 * publish what `vcfleet status` and the progress line show.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createLogger } from '../../src/shared/logger.ts';
import { SharedRateLimit } from '../../src/pacing/rate-limit.ts';
import { FleetPace } from '../../src/pacing/endpoint-pace.ts';
import { paceLines, readPolicyPace } from '../../src/pacing/published-paces.ts';
import { paceText } from '../../src/all-in-one/progress.ts';
import { REDIS_URL } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';
import { waitFor } from '../helpers/wait.ts';

const prefix = `vcftest-pace-${randomBytes(4).toString('hex')}`;
const redis = new Redis(REDIS_URL);
const logger = createLogger({ level: 'silent' });

afterAll(async () => {
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

describe('the shared pace', () => {
  it('two limiters of one key share its calls per minute; a push-back holds both', async () => {
    const key = `${prefix}:policy-rate:a`;
    const a = new SharedRateLimit(redis, key, { requestsPerMin: 60, tokensPerMin: null, adaptive: false });
    const b = new SharedRateLimit(redis, key, { requestsPerMin: 60, tokensPerMin: null, adaptive: false });
    // A burst of 2 s of the rate, then one call per second between them.
    expect(await a.tryAcquire(0)).toBe(0);
    expect(await b.tryAcquire(0)).toBe(0);
    expect(await a.tryAcquire(0)).toBeGreaterThan(500);
    expect(await b.tryAcquire(0)).toBeGreaterThan(500);
    const c = new SharedRateLimit(redis, `${prefix}:policy-rate:c`, { requestsPerMin: null, tokensPerMin: null, adaptive: false });
    expect(await c.tryAcquire(0)).toBe(0);
    await c.pushBack(5_000);
    expect(await new SharedRateLimit(redis, `${prefix}:policy-rate:c`, { requestsPerMin: null, tokensPerMin: null, adaptive: false }).tryAcquire(0)).toBeGreaterThan(4_000);
  });

  it('tokens per minute: a call is let through on its estimate and its real usage is charged after', async () => {
    const t = new SharedRateLimit(redis, `${prefix}:policy-rate:t`, { requestsPerMin: null, tokensPerMin: 6000, adaptive: false });
    // The bucket holds 10 s of tokens (1000): one call of 900, then one of 500 must wait.
    expect(await t.tryAcquire(900)).toBe(0);
    await t.settle(-800, true);
    expect(await t.tryAcquire(500)).toBe(0);
    await t.settle(2000, true);
    expect(await t.tryAcquire(100)).toBeGreaterThan(1000);
  });

  it('adaptive: the first push-back learns a rate from the calls answered clean, a later one lowers it, clean calls raise it', async () => {
    const l = new SharedRateLimit(redis, `${prefix}:policy-rate:l`, { requestsPerMin: null, tokensPerMin: null, adaptive: true });
    for (let i = 0; i < 10; i++) expect(await l.tryAcquire(0)).toBe(0);
    // Two of the ten came back clean within the first second (a burst): 2 calls over the 10 s window, less 20%.
    await l.settle(0, true);
    await l.settle(0, true);
    expect(await l.learntPerMin()).toBeNull();
    await l.pushBack(0);
    const learnt = (await l.learntPerMin())!;
    expect(learnt).toBeCloseTo(2 * 6 * 0.8, 5);
    await l.settle(0, true);
    expect((await l.learntPerMin())!).toBeGreaterThan(learnt);
    // None clean before the first push-back: one call per wait the server asked for (2 s), less 20%.
    const none = new SharedRateLimit(redis, `${prefix}:policy-rate:none`, { requestsPerMin: null, tokensPerMin: null, adaptive: true });
    expect(await none.tryAcquire(0)).toBe(0);
    await none.pushBack(2000);
    expect((await none.learntPerMin())!).toBeCloseTo(30 * 0.8, 5);
  });

  it("publishes each worker's pace for `vcfleet status`; the progress line names it once the endpoint pushed back", async () => {
    const common = { redis, prefix, endpoint: 'http://user:pw@vllm.internal:8000/v1', model: 'qwen', requestsPerMin: null, tokensPerMin: null, adaptive: true, cap: 4, logger };
    const one = new FleetPace({ ...common, workerName: 'w1' });
    const two = new FleetPace({ ...common, workerName: 'w2' });
    try {
      expect(paceText(one.state)).toBe('');
      one.done({ tokens: 0, estimate: 10, latencyMs: 5, completionTokens: 0, backpressure: true, retryAfterMs: 0 });
      expect(one.state).toMatchObject({ concurrency: 3, cap: 4, pushbacksLastMin: 1 });
      expect(paceText(one.state)).toMatch(/paced: 3\/4 at once, 1x 429 in 1 min/);
      const paces = await waitFor('both workers published', async () => {
        const p = await readPolicyPace(redis, prefix);
        return p.length === 1 && p[0].workers === 2 && p[0].pushbacks_last_min === 1 ? p : undefined;
      }, 20_000, 100);
      expect(paces[0]).toMatchObject({ endpoint: 'http://vllm.internal:8000/v1', model: 'qwen', concurrency: 7, cap: 8 });
      expect(paceLines(paces)[0]).toMatch(/^policy pace: http:\/\/vllm\.internal:8000\/v1 \(qwen\): 7\/8 sessions at once \(adaptive\) on 2 worker\(s\), 1x 429 in the last minute/);
      expect(JSON.stringify(await redis.hgetall(`${prefix}:policy-pace:${one.id}`))).not.toContain('pw@');
      // `vcfleet status` counts only workers that are alive (in the registry): a stopped one's fresh record is not a pace.
      expect((await readPolicyPace(redis, prefix, Date.now(), new Set(['w2'])))[0]).toMatchObject({ workers: 1 });
      expect(await readPolicyPace(redis, prefix, Date.now(), new Set())).toEqual([]);
    } finally {
      one.stop();
      two.stop();
    }
  });
});
