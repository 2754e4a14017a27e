/**
 * The one reader of the fleet's jobs by run, for `vcfleet status`, `retry`, the dashboard and
 * `vcfleet run`: each queue is opened once per read, the jobs of the asked states are read in pages
 * (a long queue never comes back in one reply) and grouped by the run they belong to.
 */
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { openQueue, QUEUE_NAMES, type QueueName, type QueueScope } from './registry.ts';

export const JOB_STATES = ['waiting', 'prioritized', 'delayed', 'active', 'failed'] as const;
export type JobState = (typeof JOB_STATES)[number];

const PAGE = 1000;

/** The run a job belongs to, from its unparsed data: rollout and judge jobs carry it, results jobs in their row. */
export function jobRunId(data: unknown): string | undefined {
  const d = data as { run_id?: unknown; row?: { run_id?: unknown } } | null;
  const id = d?.run_id ?? d?.row?.run_id;
  return typeof id === 'string' ? id : undefined;
}

/** Visit every job in `states` of `queues` (of one run when `runId` is given). */
export async function forEachJob(
  redis: Redis,
  prefix: string,
  states: readonly JobState[],
  visit: (queue: QueueName, state: JobState, job: Job, runId: string) => void | Promise<void>,
  options: { queues?: readonly QueueName[]; runId?: string; scope?: QueueScope } = {},
): Promise<void> {
  for (const name of options.queues ?? QUEUE_NAMES) {
    const queue = openQueue(name, redis, prefix, { scope: options.scope ?? null });
    try {
      for (const state of states) {
        for (let start = 0; ; start += PAGE) {
          const page = await queue.getJobs([state], start, start + PAGE - 1, true);
          for (const job of page) {
            const runId = job ? jobRunId(job.data) : undefined;
            if (runId !== undefined && (options.runId === undefined || runId === options.runId)) await visit(name, state, job, runId);
          }
          if (page.length < PAGE) break;
        }
      }
    } finally {
      await queue.close();
    }
  }
}

export type JobCounts = Record<QueueName, Record<JobState, number>>;

export function emptyJobCounts(): JobCounts {
  const zero = () => Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
  return Object.fromEntries(QUEUE_NAMES.map((q) => [q, zero()])) as JobCounts;
}

/** Jobs not yet finished (waiting, prioritized, delayed or running) over every queue. */
export function openJobs(counts: JobCounts): number {
  return QUEUE_NAMES.reduce((n, q) => n + counts[q].waiting + counts[q].prioritized + counts[q].delayed + counts[q].active, 0);
}

export interface RunJobs {
  counts: JobCounts;
  /** Active jobs by the worker that holds them (`processedBy`), as `queue/jobId`. */
  heldBy: Map<string, string[]>;
}

/**
 * Job counts by run (of one run with `runId`), and who holds the active ones, in the queues of
 * `scope`; only `states` are read (the others count 0).
 */
export async function readRunJobs(redis: Redis, prefix: string, runId?: string, scope: QueueScope = null, states: readonly JobState[] = JOB_STATES): Promise<Map<string, RunJobs>> {
  const out = new Map<string, RunJobs>();
  await forEachJob(
    redis, prefix, states,
    (queue, state, job, run) => {
      let r = out.get(run);
      if (!r) out.set(run, (r = { counts: emptyJobCounts(), heldBy: new Map() }));
      r.counts[queue][state]++;
      if (state === 'active' && job.processedBy) r.heldBy.set(job.processedBy, [...(r.heldBy.get(job.processedBy) ?? []), `${queue}/${job.id}`]);
    },
    { runId, scope },
  );
  return out;
}
