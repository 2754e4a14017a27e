/**
 * After a lost Redis (a failover, a restart), a run is checked against what survived. Replication is
 * asynchronous: the new primary may lack the last writes the old one acknowledged (a job added, a row
 * stored). The results consumer holds the run's JSONL, so it puts back the rows the file has and Redis
 * lacks, and produces again each rollout that has neither a row nor a job in any queue (its job id is
 * the rollout id, so producing twice adds it once; a rollout that runs twice still leaves one row,
 * `putRowIfAbsent`). A `vcfleet serve` run has no task list: its rollouts are the ones it accepted,
 * each produced again from its request's record when that survived; one whose record was lost too is
 * counted, and its client's POST of the same `_ng_rollout_id` runs it again. What it did is recorded
 * for `vcfleet status`.
 */
import type { Redis } from 'ioredis';
import type { Config } from '../../shared/config/schema.ts';
import type { Logger } from '../../shared/logger.ts';
import { enqueueBulk, openQueue, QUEUE_NAMES, rolloutId, type RolloutJob } from '../../shared/queue/registry.ts';
import type { RunRecord, RunStore } from '../../shared/stores/run-store.ts';
import { forEachJob } from '../../shared/queue/run-jobs.ts';
import { recordReconcile, type ReconcileReport } from '../../shared/stores/reconcile-record.ts';
import { RequestStore } from '../../shared/stores/request-store.ts';

/** The rollout a job is part of, from its unparsed data (every stage's job carries it). */
function rolloutOf(data: unknown): string | undefined {
  const d = data as { rollout_id?: unknown; row?: { rollout_id?: unknown } } | null;
  const id = d?.rollout_id ?? d?.row?.rollout_id;
  return typeof id === 'string' ? id : undefined;
}

export interface ReconcileDeps {
  redis: Redis;
  config: Config;
  store: RunStore;
  logger: Logger;
  /** Put back the file's rows Redis lacks; returns how many. */
  restoreRows(): Promise<number>;
}

export async function reconcileRun(deps: ReconcileDeps, run: RunRecord, reason: string): Promise<ReconcileReport> {
  const { redis, config, store, logger } = deps;
  const prefix = config.queues.prefix;
  const restored = await deps.restoreRows();
  // A failed job is left to `vcfleet retry`. Every stage adds the next stage's job before its own ends, and a row is stored before the results
  // job ends: read in the order work flows (rollout, judge, results queues, then the rows) and a
  // rollout moving on meanwhile is seen at one stage or the next.
  const live = new Set<string>();
  await forEachJob(redis, prefix, ['waiting', 'prioritized', 'delayed', 'active', 'failed'], (_q, _s, job) => {
    const id = rolloutOf(job.data);
    if (id) live.add(id);
  }, { runId: run.run_id, scope: run.queue_scope, queues: QUEUE_NAMES });
  const rows = new Set(await redis.hkeys(store.keys.rows(run.run_id)));
  const isLost = (id: string) => !rows.has(id) && !live.has(id);
  const { missing, lostRequests } = run.origin === 'serve'
    ? await lostServeRollouts(new RequestStore(redis, prefix), store, run, isLost)
    : { missing: await lostTaskRollouts(store, run, isLost), lostRequests: 0 };
  if (missing.length > 0) {
    const queue = openQueue('rollout', redis, prefix, { policy: config.queues, scope: run.queue_scope });
    try {
      // A finished rollout job (completed or failed, kept by BullMQ) would make the add a no-op under its id.
      for (const m of missing) await queue.remove(m.rollout_id).catch(() => 0);
      await enqueueBulk('rollout', queue, missing);
      await redis.sadd(store.keys.enqueued(run.run_id), ...missing.map((m) => m.rollout_id));
    } finally {
      await queue.close();
    }
  }
  const report: ReconcileReport = { run_id: run.run_id, at: new Date().toISOString(), reason, restored_rows: restored, reproduced: missing.length, lost_requests: lostRequests };
  await recordReconcile(redis, prefix, report);
  const lostText = lostRequests ? `, ${lostRequests} accepted request(s) lost with their records (their clients' POST /run of the same _ng_rollout_id runs them again)` : '';
  const line = restored || missing.length || lostRequests
    ? `reconciled run ${run.run_id} with what survived in Redis: ${restored} row(s) put back from the output file, ${missing.length} lost rollout(s) produced again${lostText}`
    : `reconciled run ${run.run_id} with what survived in Redis: nothing was lost`;
  logger.info({ run_id: run.run_id, restored_rows: restored, reproduced: missing.length, lost_requests: lostRequests, reproduced_ids: missing.slice(0, 20).map((m) => m.rollout_id), reason }, line);
  return report;
}

/** The run's rollouts (tasks x repeats) that `isLost` says are gone. */
async function lostTaskRollouts(store: RunStore, run: RunRecord, isLost: (id: string) => boolean): Promise<RolloutJob[]> {
  const missing: RolloutJob[] = [];
  for (const taskId of await store.taskIds(run.run_id)) {
    for (let repeat = 0; repeat < run.num_repeats; repeat++) {
      const id = rolloutId(run.run_id, taskId, repeat);
      if (isLost(id)) missing.push({ v: 1, run_id: run.run_id, task_id: taskId, repeat, rollout_id: id });
    }
  }
  return missing;
}

/** A serve run's accepted rollouts that are gone: produced again from their request's record, or counted when that is gone too. */
async function lostServeRollouts(requests: RequestStore, store: RunStore, run: RunRecord, isLost: (id: string) => boolean): Promise<{ missing: RolloutJob[]; lostRequests: number }> {
  const missing: RolloutJob[] = [];
  let lostRequests = 0;
  for (const id of await store.redis.smembers(store.keys.enqueued(run.run_id))) {
    if (!isLost(id)) continue;
    const record = await requests.findTask(run.run_id, id).catch(() => null);
    if (!record) {
      lostRequests++;
      continue;
    }
    const index = record.echo.routing._ng_rollout_index;
    missing.push({ v: 1, run_id: run.run_id, task_id: record.task.task_id, repeat: typeof index === 'number' ? index : 0, rollout_id: id, task_source: 'request' });
  }
  return { missing, lostRequests };
}
