/**
 * The jobs this process holds right now, so that a process that must exit at once (a second Ctrl-C)
 * can first hand them all back to their queues: each is moved to delayed with its lock token, which
 * BullMQ counts as neither an attempt nor a stall. A job that ended or moved on its own meanwhile is
 * skipped (its lock is gone). Listeners hear every take and end (`vcfleet worker --max-jobs/--idle-exit`).
 */
import type { Job } from 'bullmq';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../logger.ts';

export class InFlightJobs {
  private readonly held = new Map<Job, string | undefined>();
  private readonly listeners = new Set<() => void>();
  /** Jobs whose processor ended in this process (finished, failed or handed back). */
  ended = 0;

  /** Record a job taken with `token`; the returned function forgets it when its processor ends. */
  hold(job: Job, token: string | undefined): () => void {
    this.held.set(job, token);
    this.notify();
    return () => {
      if (!this.held.delete(job)) return;
      this.ended++;
      this.notify();
    };
  }

  /** Call `listener` after each take and each end; returns how to stop. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }

  get size(): number {
    return this.held.size;
  }

  /** Move every held job back to its queue (runnable again in 1 s); returns how many moved. */
  async handBack(logger: Logger): Promise<number> {
    const jobs = [...this.held];
    this.held.clear();
    const moved = await Promise.all(
      jobs.map(async ([job, token]) => {
        try {
          await job.moveToDelayed(Date.now() + 1000, token);
          return 1;
        } catch (err) {
          logger.debug({ job_id: job.id, err: errorMessage(err) }, 'job not handed back (it ended or moved meanwhile)');
          return 0;
        }
      }),
    );
    return moved.reduce<number>((a, b) => a + b, 0);
  }
}
