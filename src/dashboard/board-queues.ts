/**
 * The queues Bull Board shows: the fleet's shared ones, and the own queues of the most recent runs
 * that have them (`vcfleet run`, `demo`: `rollout.<runId>` ...). Kept open across refreshes; a run
 * that falls off the list has its queues closed.
 */
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { bullQueueName, openQueue, QUEUE_NAMES, type JobData, type QueueName } from '../shared/queue/registry.ts';
import { RunStore } from '../shared/stores/run-store.ts';

type AnyQueue = Queue<JobData<QueueName>>;

export class BoardQueues {
  private readonly open = new Map<string, AnyQueue>();
  private readonly store: RunStore;

  constructor(private readonly redis: Redis, private readonly prefix: string, private readonly maxRuns: number) {
    this.store = new RunStore(redis, prefix);
  }

  /** The queues to show now, opening new runs' and closing those of runs no longer listed. */
  async refresh(): Promise<AnyQueue[]> {
    const wanted: Array<{ name: QueueName; scope: string | null }> = QUEUE_NAMES.map((name) => ({ name, scope: null }));
    for (const run of await this.store.recentRuns(this.maxRuns)) {
      if (run.queue_scope) for (const name of QUEUE_NAMES) wanted.push({ name, scope: run.queue_scope });
    }
    const keep = new Set(wanted.map((w) => bullQueueName(w.name, w.scope)));
    for (const [name, queue] of this.open) {
      if (keep.has(name)) continue;
      this.open.delete(name);
      await queue.close().catch(() => undefined);
    }
    for (const w of wanted) {
      const name = bullQueueName(w.name, w.scope);
      if (!this.open.has(name)) this.open.set(name, openQueue(w.name, this.redis, this.prefix, { scope: w.scope }));
    }
    return [...this.open.values()];
  }

  async close(): Promise<void> {
    const all = [...this.open.values()];
    this.open.clear();
    await Promise.allSettled(all.map((q) => q.close()));
  }
}
