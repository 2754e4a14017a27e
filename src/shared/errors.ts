/**
 * The few error classes of the fleet. Each says whether a retry can help; only the BullMQ adapters
 * map them to BullMQ's UnrecoverableError.
 */

/** Bad configuration: fix the config file, the environment or the `++key=value` override it names. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Bad input data (parquet, tasks file, image): the message names the file or task. Never retried. */
export class DataError extends Error {
  override name = 'DataError';
}

/**
 * What failed, for code that acts on it (a run pauses on `policy_server`) rather than on the words of
 * a message: the policy server (down, refusing us, failing every call), the policy key's quota gone
 * for good (`policy_quota`: a run pauses at once), or anything else.
 */
export type InfraCode = 'policy_server' | 'policy_quota' | 'other';

/**
 * Infrastructure failed (sandbox provider, policy endpoint, judge endpoint, disk). Retried with
 * backoff; after the last attempt the rollout is masked as `infra_failed`.
 */
export class InfraError extends Error {
  override name = 'InfraError';
  readonly code: InfraCode;
  constructor(message: string, options?: { cause?: unknown; code?: InfraCode }) {
    super(message, options);
    this.code = options?.code ?? 'other';
  }
}

/** A job that can never succeed (malformed job data, a task missing from the run). Not retried. */
export class PoisonJobError extends Error {
  override name = 'PoisonJobError';
}

/**
 * Not now: the worker cannot start this job yet (its host has no room). The job goes back to its
 * queue after `delayMs`, its attempt not spent, for this or another worker.
 */
export class HandBackError extends Error {
  override name = 'HandBackError';
  constructor(message: string, readonly delayMs = 1000) {
    super(message);
  }
}

/** Whether a retry of the same work could succeed. */
export function isRetryable(err: unknown): boolean {
  return !(err instanceof ConfigError || err instanceof DataError || err instanceof PoisonJobError);
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
