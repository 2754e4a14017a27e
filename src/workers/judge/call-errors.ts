/**
 * Naming what ended a judge call, for its failure reason. Whether to retry is the openai client's
 * decision (408, 409, 429, 5xx, timeouts, connection errors; see judge-client.ts), not made here.
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { errorMessage } from '../../shared/errors.ts';

export interface CallFailure {
  /** Short kind for logs and reasons: timeout, connection, http, aborted, unexpected. */
  kind: 'timeout' | 'connection' | 'http' | 'aborted' | 'unexpected';
  message: string;
}

/** Describe an error thrown by the openai client for one judge call (after its retries). */
export function describeCallError(err: unknown): CallFailure {
  if (err instanceof APIUserAbortError) return { kind: 'aborted', message: 'aborted' };
  if (err instanceof APIConnectionTimeoutError) return { kind: 'timeout', message: 'request timed out' };
  if (err instanceof APIConnectionError) return { kind: 'connection', message: `connection error: ${withCause(err)}` };
  if (err instanceof APIError && typeof err.status === 'number') return { kind: 'http', message: `HTTP ${err.status}: ${errorMessage(err)}` };
  return { kind: 'unexpected', message: `unexpected error: ${errorMessage(err)}` };
}

/** An error's message and its cause's (fetch says only "fetch failed"; the cause says why). */
export function withCause(err: unknown): string {
  const cause = err instanceof Error ? err.cause : undefined;
  return cause ? `${errorMessage(err)} (${errorMessage(cause)})` : errorMessage(err);
}
