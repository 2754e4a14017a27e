/** What `vcfleet status` and the dashboard show of a run: rows by outcome, jobs by state, workers. */
import type { Redis } from 'ioredis';
import type { QueueName } from '../shared/queue/registry.ts';
import { RunStore, type OutputLocation, type RunRecord } from '../shared/stores/run-store.ts';
import { policySilenceWarning } from '../shared/output/tally.ts';
import { lastReconcile, type ReconcileReport } from '../shared/stores/reconcile-record.ts';
import { listWorkers, type WorkerRecord } from '../shared/queue/worker-registry.ts';
import { emptyJobCounts, openJobs, readRunJobs, type JobState } from '../shared/queue/run-jobs.ts';
import { readPolicyPace, type EndpointPace } from '../pacing/index.ts';
import { readRunProgress } from './run-progress.ts';
import type { PaperTable } from '../shared/output/paper-table.ts';
import { ServePending, type PendingCounts } from '../shared/stores/serve-pending.ts';
import { readStalls, type QueueStalls } from '../shared/queue/stall-record.ts';
import { PaperTableAccumulator } from '../shared/output/paper-table.ts';
import { isCancelledError } from '../shared/records/request-task.ts';

/** A serve run's paper table of one weight version: its rows but the cancelled ones (never graded), and how many were cancelled. */
export interface VersionTable {
  weight_version: string | null;
  paper: PaperTable;
  cancelled: number;
}

/** A serve run's paper tables, one per weight version (weights of different steps are different policies); cancelled rows left out and counted apart. */
export async function tablesByWeightVersion(store: RunStore, run: RunRecord): Promise<VersionTable[]> {
  const byVersion = new Map<string | null, { acc: PaperTableAccumulator; cancelled: number }>();
  for await (const row of store.scanRows(run.run_id)) {
    const v = row.weight_version ?? null;
    let entry = byVersion.get(v);
    if (!entry) byVersion.set(v, (entry = { acc: new PaperTableAccumulator(), cancelled: 0 }));
    if (isCancelledError(row.error)) entry.cancelled++;
    else entry.acc.add(row);
  }
  return [...byVersion.entries()]
    .sort(([a], [b]) => String(a).localeCompare(String(b)))
    .map(([weight_version, e]) => ({ weight_version, paper: e.acc.result(run.num_repeats), cancelled: e.cancelled }));
}

export interface RunStatus {
  run: RunRecord;
  rows: number;
  scored: number;
  correct: number;
  accuracy: number | null;
  /** The paper's table of the rows so far: overall, per type, per subtype, mean ± std over passes. */
  paper: PaperTable | null;
  masked: Record<string, number>;
  stop_reasons: Record<string, number>;
  /** Verdicts served from the judge cache (no judge call) among the rows. */
  judge_cache_hits: number;
  /** Warnings about the run (a policy server that never answers, sandboxes without their limits). */
  warnings: string[];
  /** Jobs of this run by queue and state (completed jobs are trimmed; their rows count instead). */
  jobs: Record<QueueName, Record<JobState, number>>;
  /** Every rollout has its row and no job of the run (a retry, a rejudge) is still waiting or running. */
  complete: boolean;
  /** Jobs of the run still waiting, delayed or running in any queue. */
  pending: number;
  /** Where the results consumer writes the run's output (null until one opened it). */
  output: OutputLocation | null;
  /** The fleet's workers (of the prefix): live ones, and those that stopped heartbeating with the jobs of this run they held. */
  workers: { live: WorkerRecord[]; stale: Array<WorkerRecord & { held: string[] }> };
  /** The fleet's pace against each policy endpoint its live sandbox-workers call (sessions at once, 429s, wait share). */
  policy_pace: EndpointPace[];
  /** The last check of the run against what survived a lost Redis (a failover), and what it restored. */
  reconciled: ReconcileReport | null;
  /** A `vcfleet serve` run's requests accepted and not finished, their image bytes, and those refused for its bounds; null for other runs. */
  serve: PendingCounts | null;
  /** A serve run's paper tables, one per weight version, cancelled rollouts left out (counted apart); null for other runs. */
  by_weight_version: VersionTable[] | null;
  /** Workers of the fleet (its prefix) that sat idle with jobs waiting and were recovered by their queue watchdog, per queue. */
  stalls: QueueStalls[];
}

export async function runStatus(redis: Redis, prefix: string, runId: string, now = Date.now()): Promise<RunStatus> {
  const store = new RunStore(redis, prefix);
  const record = await store.requireRun(runId);
  const p = await readRunProgress(store, record);
  // A serve run's total is what it accepted so far.
  const run = { ...record, total: p.total };
  const jobs = (await readRunJobs(redis, prefix, runId, run.queue_scope)).get(runId) ?? { counts: emptyJobCounts(), heldBy: new Map<string, string[]>() };
  const fleet = await listWorkers(redis, prefix, now);
  const stale = fleet.stale.map((w) => ({ ...w, held: jobs.heldBy.get(w.id) ?? [] }));
  const pending = openJobs(jobs.counts);
  const silence = policySilenceWarning(p);
  const warnings = [...(silence ? [silence] : []), ...fleet.live.flatMap((w) => w.notices)];
  return {
    run, rows: p.num_rollouts, scored: p.num_scored, correct: p.num_correct, accuracy: p.accuracy, paper: p.paper ?? null,
    masked: p.masked_by_kind, stop_reasons: p.stop_reasons, judge_cache_hits: p.judge_cache_hits, warnings, jobs: jobs.counts, pending, complete: p.complete && pending === 0,
    output: await store.getOutputLocation(runId),
    workers: { live: fleet.live, stale },
    policy_pace: await readPolicyPace(redis, prefix, now, new Set(fleet.live.map((w) => w.id))),
    reconciled: await lastReconcile(redis, prefix, runId),
    serve: record.origin === 'serve' ? await new ServePending(redis, prefix).counts(runId) : null,
    by_weight_version: record.origin === 'serve' ? await tablesByWeightVersion(store, record) : null,
    stalls: await readStalls(redis, prefix),
  };
}
