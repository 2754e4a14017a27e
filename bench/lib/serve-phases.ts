/**
 * Where a rollout's time went, read from the BullMQ jobs a run left in Redis (completed jobs are kept,
 * the last 1000 per queue) and, for `vcfleet serve`, what its client saw:
 * - accept: the request sent -> its rollout job added (serve only; `vcfleet run`'s producer adds its jobs itself);
 * - queue wait: job added -> a sandbox-worker took it;
 * - sandbox: the session (taken -> done);
 * - judge: the rollout done -> its judge job done (waiting for a judge, and the grading);
 * - results: the judge done -> the results consumer committed the row (and, for serve, left the response);
 * - response: the response left -> the client has it (serve only).
 * A rollout's time is the request sent -> the client has the response (serve), or the job added ->
 * its row committed (run).
 */
import { Redis } from 'ioredis';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { RunStore } from '../../src/shared/stores/run-store.ts';
import { fmt, median } from './stats.ts';

export const PHASES = ['accept', 'queue wait', 'sandbox', 'judge', 'results', 'response'] as const;
export type Phase = (typeof PHASES)[number];

export interface RolloutTiming {
  rolloutId: string;
  /** Seconds. */
  total: number;
  phases: Record<Phase, number>;
}

/** What the client of a serve rollout saw (epoch ms). */
export interface ClientTimes {
  sentAt: number;
  receivedAt: number;
}

export async function readPhases(redisUrl: string, prefix: string, runId: string, clients?: ReadonlyMap<string, ClientTimes>): Promise<RolloutTiming[]> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 3 });
  try {
    const run = await new RunStore(redis, prefix).requireRun(runId);
    const scope = { scope: run.queue_scope };
    const queues = { rollout: openQueue('rollout', redis, prefix, scope), judge: openQueue('judge', redis, prefix, scope), results: openQueue('results', redis, prefix, scope) };
    try {
      const [rollouts, judges, results] = await Promise.all([queues.rollout.getJobs(['completed'], 0, -1), queues.judge.getJobs(['completed'], 0, -1), queues.results.getJobs(['completed'], 0, -1)]);
      const judged = new Map(judges.filter((j) => j.data.run_id === runId).map((j) => [j.data.rollout_id, j]));
      const committed = new Map(results.filter((j) => j.data.row.run_id === runId).map((j) => [j.data.row.rollout_id, j]));
      const out: RolloutTiming[] = [];
      for (const job of rollouts) {
        if (job.data.run_id !== runId) continue;
        const id = job.data.rollout_id;
        const row = committed.get(id);
        if (!row?.finishedOn || !job.processedOn || !job.finishedOn) continue;
        const judgedAt = judged.get(id)?.finishedOn ?? job.finishedOn;
        const client = clients?.get(id);
        const start = client?.sentAt ?? job.timestamp;
        const end = client?.receivedAt ?? row.finishedOn;
        const s = (ms: number) => Math.max(0, ms) / 1000;
        out.push({
          rolloutId: id,
          total: s(end - start),
          phases: {
            accept: client ? s(job.timestamp - client.sentAt) : 0,
            'queue wait': s(job.processedOn - job.timestamp),
            sandbox: s(job.finishedOn - job.processedOn),
            judge: s(judgedAt - job.finishedOn),
            results: s(row.finishedOn - judgedAt),
            response: client ? s(client.receivedAt - row.finishedOn) : 0,
          },
        });
      }
      return out;
    } finally {
      await Promise.all(Object.values(queues).map((q) => q.close()));
    }
  } finally {
    redis.disconnect();
  }
}

/** Each phase's median over the rollouts, as `accept 0.01 / queue wait 3.2 / ...` (s). */
export function phaseText(timings: readonly RolloutTiming[]): string {
  return PHASES.map((p) => `${p} ${fmt(median(timings.map((t) => t.phases[p])), 2)}`).join(' / ');
}
