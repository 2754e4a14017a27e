/**
 * The judge's openai client and the retries around it. The client makes one attempt per call
 * (`maxRetries: 0`); p-retry calls it again on what openai's own retries retry (408, 409, 429, 5xx
 * or the server's `x-should-retry`, timeouts, connection errors), up to `judge.max_retries` after the
 * first attempt. Before each retry it waits what the server's Retry-After or retry-after-ms asked
 * (capped by attempt-fetch.ts before anything reads it), else `judge.backoff_base_ms` /
 * `judge.backoff_max_ms` (backoffMs). An abort ends the attempt or the wait at once.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI, { APIConnectionError, APIError, APIUserAbortError } from 'openai';
import pRetry from 'p-retry';
import type { Config } from '../../shared/config/load.ts';
import type { Fetch } from './attempt-fetch.ts';
import { backoffMs, retryAfterMs, type BackoffOptions } from '../../pacing/index.ts';

/** A client for one grade: `fetch` (createAttemptFetch) sees every attempt of that grade. */
export function createJudgeClient(config: Config, apiKey: string, fetch: Fetch): OpenAI {
  return new OpenAI({
    apiKey,
    baseURL: config.visual_coding_opencode_judge_base_url,
    timeout: Math.round(config.judge.timeout_s * 1000), // per attempt
    maxRetries: 0, // withRetries retries
    fetch,
    logLevel: 'off',
    // null, not undefined: keeps the client from reading OPENAI_ORG_ID / OPENAI_PROJECT_ID.
    organization: null,
    project: null,
  });
}

/** Whether a failed attempt is worth another: what openai's own retries would retry. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof APIUserAbortError) return false;
  if (err instanceof APIConnectionError) return true; // timeouts too (APIConnectionTimeoutError)
  if (!(err instanceof APIError) || typeof err.status !== 'number') return false;
  const says = err.headers?.get('x-should-retry');
  if (says === 'true' || says === 'false') return says === 'true';
  return err.status === 408 || err.status === 409 || err.status === 429 || err.status >= 500;
}

export interface RetryOptions {
  /** Retries after the first attempt (`judge.max_retries`). */
  retries: number;
  /** The wait when the server asks for none (`judge.backoff_*`). */
  backoff: BackoffOptions;
  /** Longest Retry-After honoured, in milliseconds. */
  retryAfterCapMs: number;
  /** Ends the attempt running or the wait at once (the promise rejects). */
  signal?: AbortSignal;
}

/** The wait before retry number `retry` (0 for the first) after `err`, in milliseconds: the server's, else the backoff. */
export function retryWaitMs(err: unknown, retry: number, options: Pick<RetryOptions, 'backoff' | 'retryAfterCapMs'>): number {
  const asked = err instanceof APIError && err.headers ? retryAfterMs(err.headers, Date.now(), options.retryAfterCapMs) : undefined;
  return asked ?? backoffMs(retry, options.backoff);
}

/** `attempt` (one request) again until it succeeds, fails for good or runs out of retries; rejects with the last error. */
export function withRetries<T>(attempt: () => Promise<T>, options: RetryOptions): Promise<T> {
  return pRetry(attempt, {
    retries: options.retries,
    signal: options.signal,
    shouldRetry: ({ error }) => isRetryable(error),
    // p-retry's own wait is off: the wait is the server's or the judge's backoff, slept below.
    minTimeout: 0,
    onFailedAttempt: async ({ error, retriesConsumed, retriesLeft }) => {
      if (retriesLeft > 0 && isRetryable(error)) await sleep(retryWaitMs(error, retriesConsumed, options), undefined, { signal: options.signal });
    },
  });
}
