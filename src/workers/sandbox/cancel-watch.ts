/**
 * Cancellation of running `vcfleet serve` rollouts: `DELETE /rollouts/{id}` leaves a cancel mark in
 * Redis (request-store.ts); this worker looks for the marks of the request rollouts it runs every
 * `intervalMs` (one round trip for all of them) and aborts each marked one through BullMQ's own job
 * cancellation (the signal reaches the agent, which stops the sandbox). A mark set before the
 * rollout started is seen when it starts.
 */
import type { Logger } from '../../shared/logger.ts';
import type { RequestStore } from '../../shared/stores/request-store.ts';
import { CANCELLED_ERROR } from '../../shared/records/request-task.ts';

export interface CancelWatchOptions {
  requests: Pick<RequestStore, 'cancelledOf'>;
  /** Abort the job of this rollout (its job id is the rollout id); false when this worker does not hold it. */
  cancelJob(rolloutId: string, reason: string): boolean;
  logger: Logger;
  /** How often the marks are read (ms); default 1000. */
  intervalMs?: number;
}

export interface WatchedRollout {
  /** Whether the rollout's client cancelled it (and it was aborted for that). */
  readonly cancelled: boolean;
  stop(): void;
}

export class CancelWatch {
  private readonly running = new Map<string, { runId: string; cancelled: boolean }>();
  private timer: NodeJS.Timeout | undefined;
  private reading = false;

  constructor(private readonly options: CancelWatchOptions) {}

  /** Watch a rollout while it runs. */
  watch(runId: string, rolloutId: string): WatchedRollout {
    const entry = { runId, cancelled: false };
    this.running.set(rolloutId, entry);
    this.timer ??= setInterval(() => void this.read(), this.options.intervalMs ?? 1000).unref();
    return {
      get cancelled() {
        return entry.cancelled;
      },
      stop: () => {
        if (this.running.get(rolloutId) === entry) this.running.delete(rolloutId);
        if (this.running.size === 0) this.close();
      },
    };
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private async read(): Promise<void> {
    if (this.reading || this.running.size === 0) return;
    this.reading = true;
    try {
      const watched = [...this.running].filter(([, e]) => !e.cancelled).map(([rolloutId, e]) => ({ runId: e.runId, rolloutId }));
      for (const rolloutId of await this.options.requests.cancelledOf(watched)) {
        const entry = this.running.get(rolloutId);
        if (!entry || entry.cancelled) continue;
        entry.cancelled = true;
        const held = this.options.cancelJob(rolloutId, CANCELLED_ERROR);
        this.options.logger.info({ rollout_id: rolloutId, held }, 'rollout cancelled by its client: stopping its sandbox');
      }
    } catch (err) {
      // Read again next time (Redis away for a moment).
      this.options.logger.debug({ err: (err as Error).message }, 'could not read the cancel marks');
    } finally {
      this.reading = false;
    }
  }
}
