import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/shared/config/load.ts';
import { ConfigError } from '../../src/shared/errors.ts';
import { backoffMs, retryAfterMs, RETRY_AFTER_CAP_MS } from '../../src/pacing/backoff.ts';
import { describeCallError } from '../../src/workers/judge/call-errors.ts';
import { isRetryable, retryWaitMs } from '../../src/workers/judge/judge-client.ts';
import { judgeLimiter, limiterForRate } from '../../src/workers/judge/limiter.ts';
import { resolveJudgeApiKey, PLACEHOLDER_API_KEY } from '../../src/workers/judge/openai-judge.ts';

describe('backoffMs (equal jitter)', () => {
  const opts = { baseMs: 1000, maxMs: 30_000 };
  it('doubles the ceiling and waits between half of it and all of it', () => {
    expect(backoffMs(0, { ...opts, random: () => 0 })).toBe(500);
    expect(backoffMs(0, { ...opts, random: () => 0.999999 })).toBe(1000);
    expect(backoffMs(1, { ...opts, random: () => 0 })).toBe(1000);
    expect(backoffMs(3, { ...opts, random: () => 0.5 })).toBe(6000);
  });
  it('never exceeds maxMs, even for huge attempts', () => {
    for (const attempt of [5, 10, 100, 10_000]) {
      expect(backoffMs(attempt, { ...opts, random: () => 0.999999 })).toBeLessThanOrEqual(30_000);
      expect(backoffMs(attempt, { ...opts, random: () => 0 })).toBe(15_000);
    }
  });
  it('stays in range with the default random source', () => {
    for (let i = 0; i < 100; i++) {
      const ms = backoffMs(2, opts);
      expect(ms).toBeGreaterThanOrEqual(2000);
      expect(ms).toBeLessThanOrEqual(4000);
    }
  });
});

describe('retryAfterMs', () => {
  const h = (init: Record<string, string>) => new Headers(init);
  it('reads retry-after-ms first, then retry-after seconds', () => {
    expect(retryAfterMs(h({ 'retry-after-ms': '250', 'retry-after': '9' }))).toBe(250);
    expect(retryAfterMs(h({ 'retry-after': '2' }))).toBe(2000);
    expect(retryAfterMs(h({ 'Retry-After': '1.5' }))).toBe(1500);
  });
  it('reads an HTTP date', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(retryAfterMs(h({ 'retry-after': 'Wed, 01 Jan 2025 00:00:03 GMT' }), now)).toBe(3000);
    expect(retryAfterMs(h({ 'retry-after': 'Tue, 31 Dec 2024 00:00:00 GMT' }), now)).toBe(0);
  });
  it('caps at 60 s, or at the cap given, and ignores junk', () => {
    expect(retryAfterMs(h({ 'retry-after': '3600' }))).toBe(RETRY_AFTER_CAP_MS);
    expect(retryAfterMs(h({ 'retry-after-ms': '999999' }))).toBe(RETRY_AFTER_CAP_MS);
    expect(retryAfterMs(h({ 'retry-after': '3600' }), Date.now(), 200)).toBe(200);
    expect(retryAfterMs(h({ 'retry-after': '0.1' }), Date.now(), 200)).toBe(100);
    expect(retryAfterMs(h({ 'retry-after': 'soon' }))).toBeUndefined();
    expect(retryAfterMs(h({ 'retry-after-ms': 'soon' }))).toBeUndefined();
    expect(retryAfterMs(new Headers())).toBeUndefined();
  });
});

describe('describeCallError', () => {
  it('names the kind and the message of what ended a call', () => {
    const http = APIError.generate(400, { error: { message: 'bad field' } }, undefined, new Headers());
    expect(describeCallError(http)).toEqual({ kind: 'http', message: expect.stringMatching(/^HTTP 400: .*bad field/), status: 400, code: null });
    expect(describeCallError(new APIConnectionTimeoutError())).toEqual({ kind: 'timeout', message: 'request timed out' });
    const refused = new APIConnectionError({ message: 'fetch failed', cause: new Error('ECONNREFUSED') });
    expect(describeCallError(refused)).toEqual({ kind: 'connection', message: 'connection error: fetch failed (ECONNREFUSED)' });
    expect(describeCallError(new APIUserAbortError())).toEqual({ kind: 'aborted', message: 'aborted' });
    expect(describeCallError(new TypeError('bug'))).toEqual({ kind: 'unexpected', message: 'unexpected error: bug' });
  });
});

describe('isRetryable and retryWaitMs', () => {
  const http = (status: number, headers: Record<string, string> = {}) => APIError.generate(status, { error: { message: 'x' } }, undefined, new Headers(headers));
  it('retries what openai retries: 408, 409, 429, 5xx, timeouts and connection errors, or what x-should-retry says', () => {
    for (const status of [408, 409, 429, 500, 503]) expect(isRetryable(http(status)), String(status)).toBe(true);
    for (const status of [400, 401, 404, 422]) expect(isRetryable(http(status)), String(status)).toBe(false);
    expect(isRetryable(http(400, { 'x-should-retry': 'true' }))).toBe(true);
    expect(isRetryable(http(503, { 'x-should-retry': 'false' }))).toBe(false);
    expect(isRetryable(new APIConnectionTimeoutError())).toBe(true);
    expect(isRetryable(new APIConnectionError({ message: 'fetch failed' }))).toBe(true);
    expect(isRetryable(new APIUserAbortError())).toBe(false);
    expect(isRetryable(new TypeError('bug'))).toBe(false);
  });
  it('waits what the server asked, capped, else the backoff', () => {
    const options = { backoff: { baseMs: 1000, maxMs: 30_000, random: () => 0 }, retryAfterCapMs: 5000 };
    expect(retryWaitMs(http(429, { 'retry-after-ms': '250' }), 0, options)).toBe(250);
    expect(retryWaitMs(http(429, { 'retry-after': '3600' }), 0, options)).toBe(5000);
    expect(retryWaitMs(http(503), 2, options)).toBe(2000);
    expect(retryWaitMs(new APIConnectionTimeoutError(), 0, options)).toBe(500);
  });
});

describe('judgeLimiter', () => {
  it('turns a rate into an integer BullMQ limiter', () => {
    expect(limiterForRate(10)).toEqual({ max: 10, duration: 1000 });
    expect(limiterForRate(2.5)).toEqual({ max: 5, duration: 2000 });
    expect(limiterForRate(0.5)).toEqual({ max: 1, duration: 2000 });
    expect(limiterForRate(0.2)).toEqual({ max: 1, duration: 5000 });
    expect(limiterForRate(0.3)).toEqual({ max: 3, duration: 10_000 });
    expect(limiterForRate(0.123)).toEqual({ max: 1, duration: 8130 });
    expect(limiterForRate(3.3333)).toEqual({ max: 3, duration: 900 });
    expect(() => limiterForRate(0)).toThrow(RangeError);
    expect(judgeLimiter(ConfigSchema.parse({ judge: { rate_limit_per_s: 2.5 } }))).toEqual({ max: 5, duration: 2000 });
  });
  it('keeps max an integer >= 1 and the rate about right', () => {
    for (const rate of [0.01, 0.7, 1, 1.1, 7.77, 33.3, 250]) {
      const { max, duration } = limiterForRate(rate);
      expect(Number.isInteger(max) && max >= 1).toBe(true);
      expect(Math.abs((max * 1000) / duration - rate) / rate).toBeLessThan(0.01);
    }
  });
});

describe('resolveJudgeApiKey', () => {
  it('uses the configured key', () => {
    expect(resolveJudgeApiKey(ConfigSchema.parse({ judge: { api_key: 'sk-x' } }))).toBe('sk-x');
  });
  it('sends a placeholder to other endpoints', () => {
    const config = ConfigSchema.parse({ visual_coding_opencode_judge_base_url: 'http://127.0.0.1:9/v1' });
    expect(resolveJudgeApiKey(config)).toBe(PLACEHOLDER_API_KEY);
  });
  it('refuses api.openai.com without a key, naming OPENAI_API_KEY', () => {
    expect(() => resolveJudgeApiKey(ConfigSchema.parse({}))).toThrow(ConfigError);
    expect(() => resolveJudgeApiKey(ConfigSchema.parse({}))).toThrow(/OPENAI_API_KEY/);
  });
});
