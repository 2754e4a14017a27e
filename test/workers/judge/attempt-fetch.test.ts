/** The fetch under the judge's openai client: Retry-After capped before the client reads it, one log line per attempt. */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createAttemptFetch, type Fetch } from '../../../src/workers/judge/attempt-fetch.ts';
import { RETRY_AFTER_CAP_MS } from '../../../src/pacing/backoff.ts';

const SECRET = 'sk-attempt-SECRET-9';

function setUp(send: Fetch, options: { signal?: AbortSignal; retryAfterCapMs?: number } = {}) {
  const lines: string[] = [];
  const log = pino({ level: 'debug' }, { write: (l: string) => void lines.push(l) });
  const attempts = createAttemptFetch({ fetch: send, log, clean: (t) => t.split(SECRET).join('***'), ...options });
  return { attempts, calls: () => lines.map((l) => JSON.parse(l)) };
}

const answering = (status: number, headers: Record<string, string> = {}): Fetch => async () => new Response('{}', { status, headers });

describe('Retry-After seen by the client', () => {
  it('an hour becomes the cap, as retry-after-ms', async () => {
    const res = await setUp(answering(429, { 'retry-after': '3600' })).attempts.fetch('http://judge/v1');
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBeNull();
    expect(res.headers.get('retry-after-ms')).toBe(String(RETRY_AFTER_CAP_MS));
    const small = await setUp(answering(503, { 'retry-after-ms': '999999' }), { retryAfterCapMs: 200 }).attempts.fetch('http://judge/v1');
    expect(small.headers.get('retry-after-ms')).toBe('200');
  });

  it('a wait under the cap is kept; an unreadable one is dropped so the client backs off', async () => {
    const kept = await setUp(answering(429, { 'retry-after': '2' })).attempts.fetch('http://judge/v1');
    expect(kept.headers.get('retry-after-ms')).toBe('2000');
    const junk = await setUp(answering(429, { 'retry-after': 'later' })).attempts.fetch('http://judge/v1');
    expect([junk.headers.get('retry-after'), junk.headers.get('retry-after-ms')]).toEqual([null, null]);
    expect(await junk.json()).toEqual({});
  });

  it('passes answers and errors without Retry-After through as they are', async () => {
    const ok = new Response('{"a":1}', { status: 200, headers: { 'retry-after': '3600' } });
    expect(await setUp(async () => ok).attempts.fetch('http://judge/v1')).toBe(ok);
    const plain = new Response('{}', { status: 500 });
    expect(await setUp(async () => plain).attempts.fetch('http://judge/v1')).toBe(plain);
  });
});

describe('attempt lines', () => {
  it('one line per attempt: number, latency, status or error kind; error text scrubbed', async () => {
    const replies: Array<() => Promise<Response>> = [
      async () => { throw new TypeError('fetch failed', { cause: new Error(`socket hang up ${SECRET}`) }); },
      async () => { throw new DOMException('This operation was aborted', 'AbortError'); },
      async () => new Response('{}', { status: 429, headers: { 'retry-after': '1' } }),
      async () => new Response('{}', { status: 200 }),
    ];
    const { attempts, calls } = setUp(() => replies.shift()!());
    for (let i = 0; i < 2; i++) await expect(attempts.fetch('http://judge/v1')).rejects.toThrow();
    await attempts.fetch('http://judge/v1');
    await attempts.fetch('http://judge/v1');
    expect(attempts.attempts).toBe(4);
    expect(calls().map((c) => [c.event, c.attempt, c.status, c.kind, c.http_status, c.retry_after_ms])).toEqual([
      ['judge_call', 1, 'error', 'connection', undefined, undefined],
      ['judge_call', 2, 'error', 'timeout', undefined, undefined],
      ['judge_call', 3, 'error', 'http', 429, 1000],
      ['judge_call', 4, 'ok', undefined, undefined, undefined],
    ]);
    for (const c of calls()) expect(typeof c.latency_ms).toBe('number');
    expect(calls()[0].msg).toMatch(/socket hang up \*\*\*/);
    expect(JSON.stringify(calls())).not.toContain(SECRET);
  });

  it('an abort of the grade is logged as aborted, not as a timeout', async () => {
    const ac = new AbortController();
    ac.abort();
    const { attempts, calls } = setUp(async () => { throw new DOMException('This operation was aborted', 'AbortError'); }, { signal: ac.signal });
    await expect(attempts.fetch('http://judge/v1')).rejects.toThrow();
    expect(calls()).toMatchObject([{ attempt: 1, status: 'error', kind: 'aborted' }]);
  });
});
