/** Bring work of a run back: failed jobs retried with attempts reset, judge_failed rows rejudged. */
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../shared/logger.ts';
import { byStage, enqueueBulk, openQueue, type JobData, type QueueName, type QueuePolicy } from '../shared/queue/registry.ts';
import { RunStore } from '../shared/stores/run-store.ts';
import type { Row } from '../shared/records/rows.ts';
import { SCORING_RULES } from '../shared/scoring/rules.ts';
import { forEachJob } from '../shared/queue/run-jobs.ts';
import { vcfleetCommand } from '../shared/text/advice.ts';

/** How many jobs a retry requeued, by stage. */
export type RequeuedJobs = Record<QueueName, number>;

/** Retry the failed jobs of a run in the given stages; returns how many were requeued in each. */
export async function retryFailed(redis: Redis, prefix: string, runId: string, stages: readonly QueueName[], logger: Logger): Promise<RequeuedJobs> {
  const run = await new RunStore(redis, prefix).requireRun(runId);
  // Collected first: retrying moves a job out of the failed list, which would shift the pages.
  const failed: Array<{ queue: QueueName; job: Job }> = [];
  await forEachJob(redis, prefix, ['failed'], (queue, _state, job) => void failed.push({ queue, job }), { queues: stages, runId, scope: run.queue_scope });
  const n: RequeuedJobs = byStage(() => 0);
  for (const { queue, job } of failed) {
    try {
      await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
      n[queue]++;
    } catch (err) {
      logger.warn({ job_id: job.id, err: (err as Error).message }, 'could not retry a failed job');
    }
  }
  return n;
}

/** What rejudge sends back: `judge_failed` rows always; with `rescore`, every row graded by older scoring rules too. */
export interface RejudgeOptions {
  rescore?: boolean;
  /** Grade by calls to the judge, never from the verdict cache (`--no-cache`). */
  noCache?: boolean;
}

export interface RejudgeSent {
  sent: number;
  /** Of `sent`: rows graded by older scoring rules (`rescore`). */
  rescored: number;
  /** Rows that would have gone back but had no kept agent outcome. */
  missing: number;
}

/** Whether rejudge sends a row back (infrastructure failures have no agent outcome: `vcfleet retry` runs them again). */
export function rejudgeReason(row: Row, options: RejudgeOptions): 'judge_failed' | 'rescore' | null {
  if (row.failure_kind === 'judge_failed') return 'judge_failed';
  if (options.rescore && row.failure_kind === null && row.scoring_rules < SCORING_RULES) return 'rescore';
  return null;
}

/**
 * Send every `judge_failed` row of a run back to the judge (and with `rescore`, every row graded by
 * older scoring rules), from the agent outcome kept for it; the judge stage grades it by today's
 * rules and the new row replaces the old one. Returns how many were sent and how many had no outcome.
 */
export async function rejudge(redis: Redis, prefix: string, runId: string, logger: Logger, policy: QueuePolicy, options: RejudgeOptions = {}): Promise<RejudgeSent> {
  const store = new RunStore(redis, prefix);
  const run = await store.requireRun(runId);
  const judge = openQueue('judge', redis, prefix, { policy, scope: run.queue_scope });
  let sent = 0;
  let rescored = 0;
  let missing = 0;
  // Sent in batches: the judge starts on the first while the rest are read.
  let batch: JobData<'judge'>[] = [];
  const send = async () => {
    if (batch.length) await enqueueBulk('judge', judge, batch);
    sent += batch.length;
    batch = [];
  };
  try {
    for await (const row of store.scanRows(runId)) {
      const why = rejudgeReason(row, options);
      if (why === null) continue;
      const outcome = await store.getOutcome(runId, row.rollout_id);
      if (!outcome) {
        missing++;
        logger.warn({ rollout_id: row.rollout_id }, `no agent outcome kept for this rollout; use \`${vcfleetCommand(`retry --run-id ${runId} --stage rollout`)}\` instead`);
        continue;
      }
      // A `vcfleet serve` run's tasks are its requests' (kept until their responses expire).
      const job: JobData<'judge'> = { v: 1, run_id: runId, task_id: row.task_id, repeat: row.repeat, rollout_id: row.rollout_id, outcome };
      if (run.origin === 'serve') job.task_source = 'request';
      if (options.noCache) job.no_cache = true;
      if (why === 'rescore') rescored++;
      batch.push(job);
      if (batch.length >= 100) await send();
    }
    await send();
  } finally {
    await judge.close();
  }
  return { sent, rescored, missing };
}
