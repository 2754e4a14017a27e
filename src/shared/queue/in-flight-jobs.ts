/**
 * The jobs this process holds right now, so that a process that must exit at once (a second Ctrl-C)
 * can first hand them all back to their queues: each is moved to delayed with its lock token, which
 * BullMQ counts as neither an attempt nor a stall. A job that ended or moved on its own meanwhile is
 * skipped (its lock is gone).
 */
import type { Job } from 'bullmq';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../logger.ts';

export class InFlightJobs {
  private readonly held = new Map<Job, string | undefined>();

  /** Record a job taken with `token`; the returned function forgets it when its processor ends. */
  hold(job: Job, token: string | undefined): () => void {
    this.held.set(job, token);
    return () => void this.held.delete(job);
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
