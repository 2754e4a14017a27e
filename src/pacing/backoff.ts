/**
 * Waits between attempts of a call: exponential backoff with equal jitter, and the server's
 * Retry-After headers read and capped. The judge's openai client sleeps these waits (judge-client.ts,
 * attempt-fetch.ts); the policy gateway holds the agent's calls by them (pacing/backpressure.ts).
 */

/** The longest wait a Retry-After or retry-after-ms header can impose, in milliseconds (60 s). */
export const RETRY_AFTER_CAP_MS = 60_000;

export interface BackoffOptions {
  /** Wait ceiling of the first retry, in milliseconds; it doubles with each retry. */
  baseMs: number;
  /** Largest ceiling, in milliseconds. */
  maxMs: number;
  /** A number in [0, 1); default Math.random. */
  random?: () => number;
}

/**
 * The wait before retry number `attempt` (0 for the first retry), in whole milliseconds.
 * Equal jitter: the ceiling is min(maxMs, baseMs * 2^attempt) and the wait is uniform in
 * [ceiling / 2, ceiling], so waits always grow on average yet never synchronise across workers.
 */
export function backoffMs(attempt: number, options: BackoffOptions): number {
  const random = options.random ?? Math.random;
  const exponent = Math.min(Math.max(0, Math.floor(attempt)), 30);
  const ceiling = Math.min(options.maxMs, options.baseMs * 2 ** exponent);
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.round(ceiling / 2 + (ceiling / 2) * r);
}

/**
 * The wait a server asked for, in whole milliseconds, at most `capMs`; undefined when it asked for
 * none or wrote something unreadable. `retry-after-ms` (milliseconds) wins over `retry-after`
 * (seconds or an HTTP date).
 * @param now the current time, in milliseconds since the epoch (for an HTTP date); default Date.now().
 * @param capMs default RETRY_AFTER_CAP_MS.
 */
export function retryAfterMs(headers: Headers, now: number = Date.now(), capMs: number = RETRY_AFTER_CAP_MS): number | undefined {
  const ms = Number.parseFloat(headers.get('retry-after-ms') ?? '');
  if (Number.isFinite(ms) && ms >= 0) return Math.min(Math.ceil(ms), capMs);
  const raw = headers.get('retry-after')?.trim();
  if (!raw) return undefined;
  if (/^\d+(\.\d+)?$/.test(raw)) return Math.min(Math.ceil(Number(raw) * 1000), capMs);
  const date = Date.parse(raw);
  if (Number.isNaN(date)) return undefined;
  return Math.min(Math.max(0, date - now), capMs);
}
