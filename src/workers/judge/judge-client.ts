/**
 * The judge's openai client. Retries are the package's own: 408, 409, 429, 5xx, timeouts and
 * connection errors, up to `judge.max_retries` after the first attempt, waiting what a server's
 * Retry-After asks (capped by attempt-fetch.ts before the client sees it). One thing is changed: a
 * wait the server did not set follows `judge.backoff_base_ms` / `judge.backoff_max_ms` (backoffMs)
 * instead of openai's fixed 0.5-8 s.
 */
import OpenAI from 'openai';
import type { Config } from '../../shared/config.ts';
import type { Fetch } from './attempt-fetch.ts';
import { backoffMs } from '../../pacing/backoff.ts';

/** The openai client method that picks the wait before a retry without Retry-After. */
const RETRY_WAIT_METHOD = 'calculateDefaultRetryTimeoutMillis';

/** Throws when the installed openai lost the method judge.backoff_* replaces (caught at createJudge, not mid-run). */
export function assertRetryWaitHook(): void {
  if (typeof Reflect.get(OpenAI.prototype, RETRY_WAIT_METHOD) !== 'function') {
    throw new Error(`the openai package has no ${RETRY_WAIT_METHOD} any more: judge.backoff_base_ms and judge.backoff_max_ms cannot be applied`);
  }
}

/**
 * A client for one grade: `fetch` (createAttemptFetch) sees every attempt of that grade.
 * @param random jitter source in [0, 1) for the backoff; default Math.random.
 */
export function createJudgeClient(config: Config, apiKey: string, fetch: Fetch, random?: () => number): OpenAI {
  const { judge } = config;
  const client = new OpenAI({
    apiKey,
    baseURL: config.visual_coding_opencode_judge_base_url,
    timeout: Math.round(judge.timeout_s * 1000), // per attempt
    maxRetries: judge.max_retries,
    fetch,
    logLevel: 'off',
    // null, not undefined: keeps the client from reading OPENAI_ORG_ID / OPENAI_PROJECT_ID.
    organization: null,
    project: null,
  });
  const backoff = { baseMs: judge.backoff_base_ms, maxMs: judge.backoff_max_ms, random };
  // openai declares the method private (so no subclass may override it in TypeScript), yet it is the
  // one place its retry wait is chosen; replaced on this instance only, other clients keep theirs.
  Object.defineProperty(client, RETRY_WAIT_METHOD, {
    value: (retriesRemaining: number, maxRetries: number): number => backoffMs(maxRetries - retriesRemaining, backoff),
  });
  return client;
}
