/** Waits between judge call attempts: exponential backoff with equal jitter, and Retry-After headers. */

/** The longest wait a Retry-After header can impose, in milliseconds. */
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

/** A header lookup that works for fetch `Headers` and plain objects. */
export type HeaderSource = Headers | Record<string, string | string[] | undefined> | undefined | null;

function header(headers: HeaderSource, name: string): string | undefined {
  if (!headers) return undefined;
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : (headers as Record<string, string | string[] | undefined>)[key];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The wait a server asked for, in milliseconds, capped at RETRY_AFTER_CAP_MS; undefined when it
 * asked for none. `retry-after-ms` (milliseconds) wins over `retry-after` (seconds or an HTTP date).
 */
export function retryAfterMs(headers: HeaderSource, now: number = Date.now()): number | undefined {
  const ms = Number.parseFloat(header(headers, 'retry-after-ms') ?? '');
  if (Number.isFinite(ms) && ms >= 0) return Math.min(Math.ceil(ms), RETRY_AFTER_CAP_MS);
  const raw = header(headers, 'retry-after')?.trim();
  if (!raw) return undefined;
  if (/^\d+(\.\d+)?$/.test(raw)) return Math.min(Math.ceil(Number(raw) * 1000), RETRY_AFTER_CAP_MS);
  const date = Date.parse(raw);
  if (Number.isNaN(date)) return undefined;
  return Math.min(Math.max(0, date - now), RETRY_AFTER_CAP_MS);
}

/** Resolve after `ms` milliseconds; false if `signal` aborted first (then it resolves at once). */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
