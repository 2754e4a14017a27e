/**
 * Policy servers that limit their callers, as hosted APIs and saturated vLLM servers do, for the
 * pacing tests and benchmark 10: a token bucket that answers 429 with Retry-After past its rate, a
 * server whose latency grows with the calls it serves at once, and a key whose quota is gone.
 */
import type { Script, ScriptReply } from './scripted-policy-types.ts';

export interface LimitCounts {
  /** Chat calls received. */
  calls: number;
  /** Of them, answered 429. */
  limited: number;
  /** Most calls served at once (capacity-limited). */
  peakInFlight: number;
}

export const emptyLimitCounts = (): LimitCounts => ({ calls: 0, limited: 0, peakInFlight: 0 });

/**
 * `inner` behind a token bucket of `perS` calls per second holding `burst`: a call past it gets
 * 429 with `Retry-After: retryAfterS` (default 1), as OpenAI-style rate limits answer.
 */
export function rateLimited(inner: Script, o: { perS: number; burst: number; retryAfterS?: number }, counts = emptyLimitCounts()): Script {
  let level = o.burst;
  let at = Date.now();
  return (body, index, ctx) => {
    counts.calls++;
    const now = Date.now();
    level = Math.min(o.burst, level + ((now - at) / 1000) * o.perS);
    at = now;
    if (level < 1) {
      counts.limited++;
      const reply: ScriptReply = {
        kind: 'error', status: 429, headers: { 'retry-after': String(o.retryAfterS ?? 1) },
        body: { error: { message: 'Rate limit reached for requests', type: 'requests', code: 'rate_limit_exceeded' } },
      };
      return reply;
    }
    level -= 1;
    return inner(body, index, ctx);
  };
}

/**
 * `inner` on a server that serves `capacity` calls at full speed (`baseMs` each) and shares itself
 * beyond that: a call's latency is `baseMs * max(1, calls in flight / capacity)`, like a saturated
 * vLLM server. Its throughput is at most `capacity / baseMs` calls per ms however many call it.
 */
export function capacityLimited(inner: Script, o: { capacity: number; baseMs: number }, counts = emptyLimitCounts()): Script {
  let inFlight = 0;
  return async (body, index, ctx) => {
    counts.calls++;
    inFlight++;
    counts.peakInFlight = Math.max(counts.peakInFlight, inFlight);
    try {
      const latency = o.baseMs * Math.max(1, inFlight / o.capacity);
      await new Promise((r) => setTimeout(r, latency));
      return await inner(body, index, ctx);
    } finally {
      inFlight--;
    }
  };
}

/** Every call answered 429 `insufficient_quota`, as OpenAI answers a key whose quota is spent. */
export function quotaGone(counts = emptyLimitCounts()): Script {
  return () => {
    counts.calls++;
    counts.limited++;
    return { kind: 'error', status: 429, body: { error: { message: 'You exceeded your current quota, please check your plan and billing details.', type: 'insufficient_quota', code: 'insufficient_quota' } } };
  };
}
