/**
 * When a `vcfleet worker` ends on its own, for pods that come and go with the queue (a KEDA
 * ScaledJob: one pod per rollout): after `maxJobs` jobs have ended in it, or after `idleExitS`
 * seconds with no job held. Either calls `stop` once with why; the caller stops the worker
 * (a job fetched past the maximum goes back to its queue, attempts kept).
 */
import type { InFlightJobs } from '../shared/queue/in-flight-jobs.ts';
import { ConfigError } from '../shared/errors.ts';

export interface LifetimeOptions {
  inFlight: InFlightJobs;
  /** End after this many jobs ended in this process (null: no limit). */
  maxJobs: number | null;
  /** End after this many seconds with no job held (null: never). */
  idleExitS: number | null;
  stop(reason: string): void;
}

/** Watch the process's jobs; returns how to stop watching. */
export function watchLifetime(o: LifetimeOptions): () => void {
  let done = false;
  let idleTimer: NodeJS.Timeout | undefined;
  const finish = (reason: string) => {
    if (done) return;
    done = true;
    clearTimeout(idleTimer);
    off();
    o.stop(reason);
  };
  const armIdle = () => {
    clearTimeout(idleTimer);
    if (o.idleExitS === null || o.inFlight.size > 0) return;
    idleTimer = setTimeout(() => finish(`no job for ${o.idleExitS} s (--idle-exit)`), o.idleExitS * 1000);
  };
  const check = () => {
    if (o.maxJobs !== null && o.inFlight.ended >= o.maxJobs) return finish(`${o.inFlight.ended} job(s) done (--max-jobs ${o.maxJobs})`);
    armIdle();
  };
  const off = o.inFlight.onChange(check);
  check();
  return () => {
    done = true;
    clearTimeout(idleTimer);
    off();
  };
}

/** A whole number ≥ 1 from a command-line option, or a clear error naming the option. */
export function positiveOption(name: string, value: string | undefined): number | null {
  if (value === undefined) return null;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new ConfigError(`${name} must be a whole number of at least 1, not "${value}"`);
  return n;
}
