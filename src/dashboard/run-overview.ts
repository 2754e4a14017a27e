/**
 * The run overview of the dashboard: per run, rows done out of the total, rollouts running now,
 * accuracy so far, masked rows by kind and failed jobs. The fleet's queues are read once and grouped
 * by run (run-jobs.ts, the one reader of a run's jobs); the rows of each run are counted with HSCAN.
 */
import type { Redis } from 'ioredis';
import { byStage, type QueueName } from '../shared/queue/registry.ts';
import { RunStore, type OutputLocation } from '../shared/stores/run-store.ts';
import { emptyJobCounts, readRunJobs, type JobState } from '../shared/queue/run-jobs.ts';
import { readRunProgress, type RunState } from '../ops/run-progress.ts';
import { unservedNotice } from '../ops/serving.ts';

export interface RunSummary {
  run_id: string;
  benchmark: string;
  policy_model: string;
  judge_model: string;
  created_at: string;
  output_jsonl_fpath: string;
  /** Where the results consumer writes it (host and path), once it opened it. */
  output: OutputLocation | null;
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
  /** Jobs of the run queued that no live worker serves, and how to start one; null when none. */
  notice: string | null;
  /** `failed`: complete, and every row masked (nothing was scored); `complete`: complete with scores; else `running`. */
  state: RunState;
}

/** The job states the overview shows (running rollouts, failed jobs). */
const SHOWN_STATES: readonly JobState[] = ['active', 'failed'];

/** The most recent `maxRuns` runs, newest first. */
export async function runOverview(redis: Redis, prefix: string, maxRuns = 50): Promise<RunSummary[]> {
  const store = new RunStore(redis, prefix);
  // The fleet's queues are read once for every run in them; a run with queues of its own, in those.
  // Only running and failed jobs are shown, so only those are read (the waiting list is the long one).
  const fleetJobs = await readRunJobs(redis, prefix, undefined, null, SHOWN_STATES);
  const out: RunSummary[] = [];
  for (const run of await store.recentRuns(maxRuns)) {
    const id = run.run_id;
    const jobs = (run.queue_scope === null ? fleetJobs : await readRunJobs(redis, prefix, id, run.queue_scope, SHOWN_STATES)).get(id)?.counts ?? emptyJobCounts();
    const p = await readRunProgress(store, run);
    out.push({
      run_id: id, benchmark: run.benchmark, policy_model: run.policy_model, judge_model: run.judge_model,
      created_at: run.created_at, output_jsonl_fpath: run.output_jsonl_fpath, output: await store.getOutputLocation(id), total: p.total,
      done: p.num_rollouts, scored: p.num_scored, correct: p.num_correct, accuracy: p.accuracy, masked: p.masked_by_kind,
      running: jobs.rollout.active,
      failed: byStage((q) => jobs[q].failed),
      complete: p.complete,
      notice: await unservedNotice(redis, prefix, run),
      state: p.state,
    });
  }
  return out;
}
