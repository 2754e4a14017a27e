/** What `vcfleet status` and the dashboard show of a run: rows by outcome and jobs by state. */
import type { Redis } from 'ioredis';
import type { Job } from 'bullmq';
import { openQueue, QUEUE_NAMES, type QueueName } from '../shared/queues.ts';
import { RunStore, type RunRecord } from '../shared/run-store.ts';
import { accuracyOf, policySilenceWarning, RowTally, type TallyCounts } from '../shared/row-tally.ts';
import { listWorkers, type WorkerRecord } from '../shared/worker-registry.ts';

export const JOB_STATES = ['waiting', 'prioritized', 'delayed', 'active', 'failed'] as const;
export type JobState = (typeof JOB_STATES)[number];

export interface RunStatus {
  run: RunRecord;
  rows: number;
  scored: number;
  correct: number;
  accuracy: number | null;
  masked: Record<string, number>;
  stop_reasons: Record<string, number>;
  /** Warnings about the run (e.g. a policy server that never answers). */
  warnings: string[];
  /** Jobs of this run by queue and state (completed jobs are trimmed; their rows count instead). */
  jobs: Record<QueueName, Record<JobState, number>>;
  complete: boolean;
  /** The fleet's workers (of the prefix): live ones, and those that stopped heartbeating with the jobs of this run they held. */
  workers: { live: WorkerRecord[]; stale: Array<WorkerRecord & { held: string[] }> };
}

/** The run a job belongs to, from its (unparsed) data: rollout and judge jobs carry it, results jobs in their row. */
function jobRunId(data: unknown): string | undefined {
  const d = data as { run_id?: string; row?: { run_id?: string } } | null;
  return d?.run_id ?? d?.row?.run_id;
}

/** Every job of a run in the given states of one queue (paged, so a large queue is read in pieces). */
export async function runJobs(redis: Redis, prefix: string, queue: QueueName, runId: string, states: readonly JobState[]): Promise<Job[]> {
  const q = openQueue(queue, redis, prefix);
  const out: Job[] = [];
  try {
    for (const state of states) {
      for (let start = 0; ; start += 1000) {
        const page = await q.getJobs([state], start, start + 999, true);
        for (const job of page) if (job && jobRunId(job.data) === runId) out.push(job);
        if (page.length < 1000) break;
      }
    }
  } finally {
    await q.close();
  }
  return out;
}

/** Rows of a run by outcome (one HSCAN pass). */
export async function tallyRows(store: RunStore, runId: string): Promise<TallyCounts> {
  const tally = new RowTally();
  for await (const row of store.scanRows(runId)) tally.add(row);
  return tally.counts;
}

export async function runStatus(redis: Redis, prefix: string, runId: string, now = Date.now()): Promise<RunStatus> {
  const store = new RunStore(redis, prefix);
  const run = await store.requireRun(runId);
  const t = await tallyRows(store, runId);
  const jobs = {} as RunStatus['jobs'];
  const heldBy = new Map<string, string[]>();
  for (const queue of QUEUE_NAMES) {
    jobs[queue] = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
    for (const state of JOB_STATES) {
      const found = await runJobs(redis, prefix, queue, runId, [state]);
      jobs[queue][state] = found.length;
      if (state !== 'active') continue;
      for (const job of found) if (job.processedBy) heldBy.set(job.processedBy, [...(heldBy.get(job.processedBy) ?? []), `${queue}/${job.id}`]);
    }
  }
  const fleet = await listWorkers(redis, prefix, now);
  const stale = fleet.stale.map((w) => ({ ...w, held: heldBy.get(w.id) ?? [] }));
  const silence = policySilenceWarning(t);
  const warnings = [...(silence ? [silence] : []), ...fleet.live.flatMap((w) => w.notices)];
  return {
    run, rows: t.done, scored: t.scored, correct: t.correct, accuracy: accuracyOf(t),
    masked: t.maskedByKind, stop_reasons: t.stopReasons, warnings, jobs, complete: t.done >= run.total,
    workers: { live: fleet.live, stale },
  };
}
