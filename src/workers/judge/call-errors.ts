/**
 * Which failed judge calls are worth retrying. Retried: timeouts, connection errors, 5xx, 408,
 * 409 and 429 (honouring the server's Retry-After). Every other 4xx, and anything unknown, is final.
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { errorMessage } from '../../shared/errors.ts';
import { retryAfterMs } from './backoff.ts';

export interface CallFailure {
  /** Short kind for logs and reasons: timeout, connection, http, aborted, unexpected. */
  kind: 'timeout' | 'connection' | 'http' | 'aborted' | 'unexpected';
  retryable: boolean;
  /** HTTP status when the server answered. */
  httpStatus?: number;
  /** Wait the server asked for (Retry-After), in milliseconds, capped at 60 s. */
  retryAfterMs?: number;
  message: string;
}

/** HTTP statuses below 500 that are transient. */
const RETRYABLE_4XX = new Set([408, 409, 429]);

/** Whether an HTTP status is worth retrying. */
export function isRetryableStatus(status: number): boolean {
  return status >= 500 || RETRYABLE_4XX.has(status);
}

/** Classify an error thrown by the openai client for one judge call. */
export function classifyCallError(err: unknown): CallFailure {
  if (err instanceof APIUserAbortError) return { kind: 'aborted', retryable: false, message: 'aborted' };
  if (err instanceof APIConnectionTimeoutError) return { kind: 'timeout', retryable: true, message: 'request timed out' };
  if (err instanceof APIConnectionError) {
    return { kind: 'connection', retryable: true, message: `connection error: ${causeMessage(err)}` };
  }
  if (err instanceof APIError && typeof err.status === 'number') {
    return {
      kind: 'http',
      retryable: isRetryableStatus(err.status),
      httpStatus: err.status,
      retryAfterMs: retryAfterMs(err.headers),
      message: `HTTP ${err.status}: ${errorMessage(err)}`,
    };
  }
  return { kind: 'unexpected', retryable: false, message: `unexpected error: ${errorMessage(err)}` };
}

function causeMessage(err: Error): string {
  const cause = (err as { cause?: unknown }).cause;
  return cause ? `${errorMessage(err)} (${errorMessage(cause)})` : errorMessage(err);
}
