/**
 * The run overview of the dashboard: per run, rows done out of the total, rollouts running now,
 * accuracy so far, masked rows by kind and failed jobs. Lighter than `runStatus` (which reads every
 * job state of every queue per run): the active and failed jobs of each queue are read once and
 * grouped by run, and the rows of each run are counted with HSCAN.
 */
import type { Redis } from 'ioredis';
import { openQueue, QUEUE_NAMES, type QueueName } from '../shared/queues.ts';
import { RunStore } from '../shared/run-store.ts';
import { tallyRows } from '../ops/run-status.ts';
import { jobIds } from './viewer-links.ts';

export interface RunSummary {
  run_id: string;
  benchmark: string;
  policy_model: string;
  judge_model: string;
  created_at: string;
  output_jsonl_fpath: string;
  /** Rollouts in the run (tasks x repeats). */
  total: number;
  /** Rollouts with a row (scored or masked). */
  done: number;
  scored: number;
  correct: number;
  /** correct / scored; null before the first scored row. */
  accuracy: number | null;
  /** Masked rows by failure kind. */
  masked: Record<string, number>;
  /** Rollouts running now (active rollout jobs). */
  running: number;
  /** Failed jobs by queue (requeue them with `vcfleet retry` or the board). */
  failed: Record<QueueName, number>;
  /** Every rollout has a row (scored or masked). */
  complete: boolean;
  /** `failed`: complete, and every row masked (nothing was scored); `complete`: complete with scores; else `running`. */
  state: RunState;
}

export type RunState = 'running' | 'complete' | 'failed';

/** A run that ended without a single score failed, whatever its row count says. */
export function runState(done: number, total: number, scored: number): RunState {
  if (done < total) return 'running';
  return done > 0 && scored === 0 ? 'failed' : 'complete';
}

type JobCountsByRun = Map<string, Record<QueueName, number>>;

/** Jobs of one state in every queue, counted by run (paged, so a long queue is read in pieces). */
async function countByRun(redis: Redis, prefix: string, state: 'active' | 'failed'): Promise<JobCountsByRun> {
  const out: JobCountsByRun = new Map();
  for (const name of QUEUE_NAMES) {
    const queue = openQueue(name, redis, prefix);
    try {
      for (let start = 0; ; start += 1000) {
        const page = await queue.getJobs([state], start, start + 999, true);
        for (const job of page) {
          const runId = job ? jobIds(job.data).run_id : undefined;
          if (!runId) continue;
          const counts = out.get(runId) ?? { rollout: 0, judge: 0, results: 0 };
          counts[name]++;
          out.set(runId, counts);
        }
        if (page.length < 1000) break;
      }
    } finally {
      await queue.close();
    }
  }
  return out;
}

/** The most recent `maxRuns` runs, newest first. */
export async function runOverview(redis: Redis, prefix: string, maxRuns = 50): Promise<RunSummary[]> {
  const store = new RunStore(redis, prefix);
  const ids = await redis.zrevrange(store.keys.runs(), 0, maxRuns - 1);
  const [active, failed] = await Promise.all([countByRun(redis, prefix, 'active'), countByRun(redis, prefix, 'failed')]);
  const out: RunSummary[] = [];
  for (const id of ids) {
    const run = await store.getRun(id);
    if (!run) continue;
    const { done, scored, correct, maskedByKind: masked } = await tallyRows(store, id);
    out.push({
      run_id: id, benchmark: run.benchmark, policy_model: run.policy_model, judge_model: run.judge_model,
      created_at: run.created_at, output_jsonl_fpath: run.output_jsonl_fpath, total: run.total,
      done, scored, correct, accuracy: scored ? correct / scored : null, masked,
      running: active.get(id)?.rollout ?? 0,
      failed: failed.get(id) ?? { rollout: 0, judge: 0, results: 0 },
      complete: done >= run.total,
      state: runState(done, run.total, scored),
    });
  }
  return out;
}
