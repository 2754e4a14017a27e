/** Bring work of a run back: failed jobs retried with attempts reset, judge_failed rows rejudged. */
import type { Redis } from 'ioredis';
import type { Logger } from '../shared/logger.ts';
import { openQueue, type QueueName } from '../shared/queues.ts';
import { RunStore } from '../shared/run-store.ts';
import { runJobs } from './run-status.ts';

/** Retry the failed jobs of a run in the given stages; returns how many were requeued. */
export async function retryFailed(redis: Redis, prefix: string, runId: string, stages: readonly QueueName[], logger: Logger): Promise<number> {
  await new RunStore(redis, prefix).requireRun(runId);
  let n = 0;
  for (const stage of stages) {
    for (const job of await runJobs(redis, prefix, stage, runId, ['failed'])) {
      try {
        await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
        n++;
      } catch (err) {
        logger.warn({ job: job.id, err: (err as Error).message }, 'could not retry a failed job');
      }
    }
  }
  return n;
}

/**
 * Send every `judge_failed` row of a run back to the judge, from the agent outcome kept for it; the
 * new grading replaces the masked row. Returns how many were sent and how many had no outcome.
 */
export async function rejudge(redis: Redis, prefix: string, runId: string, logger: Logger, attempts = 2): Promise<{ sent: number; missing: number }> {
  const store = new RunStore(redis, prefix);
  await store.requireRun(runId);
  const judge = openQueue('judge', redis, prefix);
  let sent = 0;
  let missing = 0;
  try {
    for await (const row of store.scanRows(runId)) {
      if (row.failure_kind !== 'judge_failed') continue;
      const outcome = await store.getOutcome(runId, row.rollout_id);
      if (!outcome) {
        missing++;
        logger.warn({ rollout: row.rollout_id }, 'no agent outcome kept for this rollout; use `vcfleet retry --stage rollout` instead');
        continue;
      }
      await judge.add(
        'judge',
        { v: 1, run_id: runId, task_id: row.task_id, repeat: row.repeat, rollout_id: row.rollout_id, outcome },
        { jobId: `${row.rollout_id}-rejudge-${Date.now().toString(36)}`, attempts, backoff: { type: 'exponential', delay: 2000 } },
      );
      sent++;
    }
  } finally {
    await judge.close();
  }
  return { sent, missing };
}
