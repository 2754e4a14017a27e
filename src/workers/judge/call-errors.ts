/**
 * Naming what ended a judge call, for its failure reason. Whether to retry is decided in
 * judge-client.ts (408, 409, 429, 5xx, timeouts, connection errors), not here.
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { errorMessage } from '../../shared/errors.ts';

export interface CallFailure {
  /** Short kind for logs and reasons: timeout, connection, http, aborted, unexpected. */
  kind: 'timeout' | 'connection' | 'http' | 'aborted' | 'unexpected';
  message: string;
  /** For `http`: the status, and the error code the server gave (`context_length_exceeded`, `content_filter`, ...). */
  status?: number;
  code?: string | null;
}

/** Error codes and messages of a judge that refuses what it was given, as it would every time. */
const CONTENT_CODES = new Set(['context_length_exceeded', 'content_filter', 'content_policy_violation', 'string_above_max_length']);
const CONTENT_MESSAGE = /context[ _]length|maximum context|context window|too many tokens|prompt is too long|content[ _](management[ _])?polic|content[ _]filter|flagged by|safety system/i;

/**
 * Whether the judge refused the grading input itself (400/413/422 with a context-length or content
 * code or message): deterministic, so the rollout scores 0 instead of being masked.
 */
export function isContentRefusal(failure: CallFailure): boolean {
  if (failure.kind !== 'http' || ![400, 413, 422].includes(failure.status ?? 0)) return false;
  return (failure.code !== undefined && failure.code !== null && CONTENT_CODES.has(failure.code)) || CONTENT_MESSAGE.test(failure.message);
}

/** Describe an error thrown by the openai client for one judge call (after its retries). */
export function describeCallError(err: unknown): CallFailure {
  if (err instanceof APIUserAbortError) return { kind: 'aborted', message: 'aborted' };
  if (err instanceof APIConnectionTimeoutError) return { kind: 'timeout', message: 'request timed out' };
  if (err instanceof APIConnectionError) return { kind: 'connection', message: `connection error: ${withCause(err)}` };
  if (err instanceof APIError && typeof err.status === 'number') {
    const code = typeof err.code === 'string' ? err.code : null;
    return { kind: 'http', message: `HTTP ${err.status}: ${errorMessage(err)}`, status: err.status, code };
  }
  return { kind: 'unexpected', message: `unexpected error: ${errorMessage(err)}` };
}

/** An error's message and its cause's (fetch says only "fetch failed"; the cause says why). */
export function withCause(err: unknown): string {
  const cause = err instanceof Error ? err.cause : undefined;
  return cause ? `${errorMessage(err)} (${errorMessage(cause)})` : errorMessage(err);
}
