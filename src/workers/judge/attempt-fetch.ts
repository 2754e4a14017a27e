/**
 * The fetch the judge's openai client sends each attempt through. It logs every attempt (number,
 * latency, HTTP status or error kind) and caps the server's Retry-After before anything reads it (the
 * retries of judge-client.ts wait what the error's headers say), so a server asking for an hour
 * cannot hold a judge worker for an hour.
 */
import type { Logger } from '../../shared/logger.ts';
import { retryAfterMs, RETRY_AFTER_CAP_MS } from '../../pacing/index.ts';
import { withCause } from './call-errors.ts';

/** The fetch signature the openai client takes. */
export type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface AttemptFetchOptions {
  /** Sends the request; default the global fetch. */
  fetch?: Fetch;
  /** Gets one `judge_call` line per attempt. */
  log: Logger;
  /** Removes secrets from error text before it is logged. */
  clean: (text: string) => string;
  /** The grade's abort signal: an abort and a timeout both abort the request; this tells them apart. */
  signal?: AbortSignal;
  /** Longest Retry-After passed on to the retries, in milliseconds; default RETRY_AFTER_CAP_MS (60 s). */
  retryAfterCapMs?: number;
}

export interface AttemptFetch {
  /** For one grade's openai client: it must see every attempt of that grade, and only those. */
  fetch: Fetch;
  /** Attempts sent so far. */
  readonly attempts: number;
}

/**
 * The response with its Retry-After headers replaced by one `retry-after-ms` holding the capped
 * wait, or by none when they were unreadable (so the retry backs off instead of reading junk).
 */
function withRetryAfter(response: Response, waitMs: number | undefined): Response {
  const { headers, status, statusText } = response;
  // Response() refuses statuses below 200, and these headers are read only on the 4xx/5xx that are retried.
  if (status < 400 || (!headers.has('retry-after') && !headers.has('retry-after-ms'))) return response;
  const clamped = new Headers(headers);
  clamped.delete('retry-after');
  clamped.delete('retry-after-ms');
  if (waitMs !== undefined) clamped.set('retry-after-ms', String(waitMs));
  return new Response(response.body, { status, statusText, headers: clamped });
}

/** A fetch that counts and logs one grade's attempts and caps Retry-After; see the file comment. */
export function createAttemptFetch(options: AttemptFetchOptions): AttemptFetch {
  const send: Fetch = options.fetch ?? ((input, init) => fetch(input, init));
  const capMs = options.retryAfterCapMs ?? RETRY_AFTER_CAP_MS;
  let attempts = 0;
  const attemptFetch: Fetch = async (input, init) => {
    const attempt = ++attempts;
    const started = performance.now();
    // latency_ms: until the response headers (or the error), in milliseconds.
    const line = (fields: object) => ({ event: 'judge_call', attempt, latency_ms: Math.round(performance.now() - started), ...fields });
    let response: Response;
    try {
      response = await send(input, init);
    } catch (err) {
      // openai aborts the request both for its per-attempt timeout and for the grade's signal.
      const kind = options.signal?.aborted ? 'aborted' : err instanceof Error && err.name === 'AbortError' ? 'timeout' : 'connection';
      options.log[kind === 'aborted' ? 'info' : 'warn'](line({ status: 'error', kind }), `judge call failed: ${kind}: ${options.clean(withCause(err))}`);
      throw err;
    }
    if (response.ok) {
      options.log.info(line({ status: 'ok' }), 'judge call answered');
      return response;
    }
    const waitMs = retryAfterMs(response.headers, Date.now(), capMs);
    options.log.warn(line({ status: 'error', kind: 'http', http_status: response.status, retry_after_ms: waitMs }), `judge call failed: HTTP ${response.status}`);
    return withRetryAfter(response, waitMs);
  };
  return {
    fetch: attemptFetch,
    get attempts() {
      return attempts;
    },
  };
}
