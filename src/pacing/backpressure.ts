/**
 * Back-pressure from the policy server, told apart from failure: a 429, or a 503 that says when to
 * come back (`Retry-After`), asks the gateway to wait, not to give up. A 429 whose error says the
 * quota is gone (`insufficient_quota`) is neither: no wait brings it back. Pure, so the rules are
 * tested without a server.
 */
import type http from 'node:http';
import { backoffMs, retryAfterMs } from './backoff.ts';

/** First backoff ceiling when the server names no wait, in ms; doubled per held try up to 30 s. */
const BACKOFF = { baseMs: 1000, maxMs: 30_000 };

/** A status the gateway holds a call on (given the response's headers). */
export function isBackpressure(status: number, headers: http.IncomingHttpHeaders): boolean {
  return status === 429 || (status === 503 && (headers['retry-after'] !== undefined || headers['retry-after-ms'] !== undefined));
}

/** Error codes that say no amount of waiting brings the policy server back for this key. */
const QUOTA_GONE = new Set(['insufficient_quota', 'billing_hard_limit_reached', 'quota_exceeded']);

/** The 429's error says the key's quota is spent for good (OpenAI's `insufficient_quota`). */
export function isQuotaGone(errorCode: string | null): boolean {
  return errorCode !== null && QUOTA_GONE.has(errorCode);
}

/** The wait the server asks for (`retry-after-ms`, else `Retry-After`), capped (backoff.ts); null when it names none. */
export function askedWaitMs(headers: http.IncomingHttpHeaders, now = Date.now()): number | null {
  const h = new Headers();
  for (const name of ['retry-after', 'retry-after-ms']) {
    const v = headers[name];
    if (typeof v === 'string') h.set(name, v);
  }
  return retryAfterMs(h, now) ?? null;
}

/**
 * How long to wait before held try `tries` (1 for the first wait): what the server asked for, plus
 * up to 20% jitter so held calls of many sessions do not come back at the same instant; without a
 * named wait, equal-jitter exponential backoff.
 */
export function holdDelayMs(tries: number, askedMs: number | null, random: () => number = Math.random): number {
  if (askedMs !== null) return Math.round(askedMs * (1 + 0.2 * random()));
  return backoffMs(tries - 1, { ...BACKOFF, random });
}
