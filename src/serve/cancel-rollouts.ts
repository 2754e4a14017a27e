/**
 * Cancelling `vcfleet serve` rollouts, one or many at once (a trainer cutting the stragglers of a
 * step): each gets its cancel mark, which stops it wherever it is (a sandbox-worker aborts its
 * session; the judge does not grade it). A rollout still waiting in the rollout queue, or whose judge
 * job is still waiting, is taken out of that queue (the judge job is dropped, never graded) and its
 * row made here; the results consumer writes it and leaves its response. A job that became active
 * meanwhile cannot be removed (it is locked): its worker sees the mark. The row says the rollout was
 * cancelled and is never scored.
 */
import type { Queue } from 'bullmq';
import type { Logger } from '../shared/logger.ts';
import { enqueueBulk, type JobData, type ResultsJob } from '../shared/queue/registry.ts';
import type { RequestStore } from '../shared/stores/request-store.ts';
import { CANCELLED_ERROR } from '../shared/records/request-task.ts';
import { buildRow } from '../shared/records/rows.ts';
import { rowContext } from '../shared/stores/row-context.ts';
import type { RunRecord } from '../shared/stores/run-store.ts';
import type { RolloutOutcome } from '../shared/records/rollout-outcome.ts';
import { currentOutcome } from '../shared/scoring/rules.ts';

/** Job states in which a job is not yet taken by a worker (it can be removed). */
const NOT_TAKEN = ['waiting', 'delayed', 'prioritized', 'paused', 'waiting-children'] as const;

export interface CancelDeps {
  run: RunRecord;
  requests: RequestStore;
  rollouts: Queue<JobData<'rollout'>>;
  judge: Queue<JobData<'judge'>>;
  results: Queue<JobData<'results'>>;
  logger: Logger;
}

export interface CancelReport {
  /** Taken out of the rollout queue before it started. */
  fromRolloutQueue: string[];
  /** Its judge job dropped before it was graded. */
  fromJudgeQueue: string[];
}

/** Cancel these pending rollouts (fleet rollout ids with their repeat), in a few round trips however many. */
export async function cancelRollouts(deps: CancelDeps, rolloutIds: readonly string[], error: string = CANCELLED_ERROR): Promise<CancelReport> {
  const report: CancelReport = { fromRolloutQueue: [], fromJudgeQueue: [] };
  if (rolloutIds.length === 0) return report;
  const runId = deps.run.run_id;
  const wanted = new Set(rolloutIds);
  // The marks first: whatever a worker takes from now on, it sees them.
  await Promise.all(rolloutIds.map((id) => deps.requests.cancel(runId, id)));
  const made: Array<{ rolloutId: string; repeat: number; outcome: RolloutOutcome | null }> = [];
  const jobs = await Promise.all(rolloutIds.map((id) => deps.rollouts.getJob(id)));
  for (const job of jobs) {
    if (!job || !(NOT_TAKEN as readonly string[]).includes(await job.getState())) continue;
    if (await job.remove().then(() => true, () => false)) {
      made.push({ rolloutId: job.data.rollout_id, repeat: job.data.repeat, outcome: null });
      report.fromRolloutQueue.push(job.data.rollout_id);
    }
  }
  // Judge jobs waiting: dropped, the rollout's outcome kept in its row (never graded).
  const waiting = await deps.judge.getJobs(['waiting', 'delayed', 'prioritized', 'waiting-children'], 0, -1);
  for (const job of waiting) {
    if (!job?.data || job.data.run_id !== runId || !wanted.has(job.data.rollout_id)) continue;
    if (await job.remove().then(() => true, () => false)) {
      made.push({ rolloutId: job.data.rollout_id, repeat: job.data.repeat, outcome: currentOutcome(job.data.outcome) });
      report.fromJudgeQueue.push(job.data.rollout_id);
    }
  }
  const rows: ResultsJob[] = [];
  for (const m of made) {
    const record = await deps.requests.findTask(runId, m.rolloutId);
    if (!record) continue;
    const row = buildRow(rowContext(deps.run, record.task, { rollout_id: m.rolloutId, repeat: m.repeat }, record), m.outcome, { kind: 'masked', failure: 'infra_failed', error });
    rows.push({ v: 1, row });
  }
  if (rows.length) await enqueueBulk('results', deps.results, rows);
  deps.logger.info({ cancelled: rolloutIds.length, removed_from_rollout_queue: report.fromRolloutQueue.length, judge_jobs_dropped: report.fromJudgeQueue.length }, 'rollouts cancelled by their client');
  return report;
}
