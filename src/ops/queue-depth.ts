/**
 * `vcfleet_queue_jobs{queue,state,prefix}`: the depth of every queue of the fleet under its key
 * prefix (fleets that share a Redis tell theirs apart by it: a KEDA trigger selects on it), read with
 * `getJobCounts` when Prometheus scrapes (never on a timer). A scrape during a Redis outage does not
 * hang: after `timeoutMs` the gauge reports nothing for that scrape.
 */
import { Gauge, type Registry } from 'prom-client';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { openQueue, QUEUE_NAMES, type JobData, type QueueName } from '../shared/queue/registry.ts';

/** The states a depth is reported for (completed jobs are trimmed, so their count is a recent window). */
export const DEPTH_STATES = ['waiting', 'prioritized', 'delayed', 'active', 'failed', 'completed', 'waiting-children'] as const;

export interface QueueDepthSource {
  /** Start reporting the queues under `prefix`, read through `redis` (owned by the caller). */
  watch(redis: Redis, prefix: string): void;
  close(): Promise<void>;
}

export function createQueueDepthGauge(registry: Registry, timeoutMs = 2000): QueueDepthSource {
  let queues: Array<Queue<JobData<QueueName>>> = [];
  let watched = '';
  new Gauge({
    name: 'vcfleet_queue_jobs',
    help: 'Jobs per queue and state across the fleet, read from Redis on scrape.',
    labelNames: ['queue', 'state', 'prefix'],
    registers: [registry],
    async collect() {
      this.reset();
      if (queues.length === 0) return;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), timeoutMs)));
      try {
        const counts = await Promise.race([Promise.all(queues.map((q) => q.getJobCounts(...DEPTH_STATES))), timeout]);
        counts?.forEach((byState, i) => {
          for (const state of DEPTH_STATES) this.set({ queue: queues[i].name, state, prefix: watched }, byState[state] ?? 0);
        });
      } catch {
        // Redis is away: this scrape has no depths; the next one tries again.
      } finally {
        clearTimeout(timer);
      }
    },
  });
  return {
    watch(redis, prefix) {
      watched = prefix;
      queues = QUEUE_NAMES.map((name) => openQueue(name, redis, prefix));
    },
    async close() {
      const open = queues;
      queues = [];
      await Promise.allSettled(open.map((q) => q.close()));
    },
  };
}
