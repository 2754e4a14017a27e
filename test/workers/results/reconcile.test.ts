/**
 * After a lost Redis, a run is checked against what survived (real Redis, a prefix of this test's
 * own): a row the JSONL holds and Redis lost is put back from the file; a rollout with neither a row
 * nor a job is produced again under its own job id; a rollout whose judge job survived is left alone;
 * a second pass finds nothing to do; `vcfleet status` reads what was done. A `vcfleet serve` run's
 * lost rollout is produced again from its request's record; one lost with its record is counted, and
 * its client's POST of the same id is accepted anew (not taken for a rollout still under way).
 */
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { Queue } from 'bullmq';
import { createLogger } from '../../../src/shared/logger.ts';
import { buildRow, type Row } from '../../../src/shared/records/rows.ts';
import { ConfigSchema } from '../../../src/shared/config/load.ts';
import { runSettingsFrom } from '../../../src/shared/config/run-settings.ts';
import { RunStore, type RunRecord } from '../../../src/shared/stores/run-store.ts';
import { openQueue } from '../../../src/shared/queue/registry.ts';
import { lastReconcile } from '../../../src/shared/stores/reconcile-record.ts';
import { RunOutput } from '../../../src/workers/results/run-output.ts';
import { reconcileRun } from '../../../src/workers/results/reconcile.ts';
import { rolloutOutcome } from '../../../src/shared/records/rollout-outcome.ts';
import { runStatus } from '../../../src/ops/run-status.ts';
import { REDIS_URL } from '../../helpers/fleet.ts';
import { parseRunBody } from '../../../src/serve/gym-request.ts';
import { requestRecord, serveRolloutId } from '../../../src/serve/request-record.ts';
import { RolloutService } from '../../../src/serve/rollout-service.ts';
import { RequestStore } from '../../../src/shared/stores/request-store.ts';
import { gymRow, pngUrl } from '../../helpers/serve.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';
import { deletePrefix } from '../../helpers/redis-keys.ts';

const logger = createLogger({ level: 'silent' });

function row(runId: string, i: number): Row {
  const task = { task_id: `t${i}`, type: 'T', subtype: 'S', ans_type: 'choice' as const, gold: 'A' };
  return buildRow({ runId, benchmark: 'b', policyModel: 'p', judgeModel: 'j', rolloutId: `${runId}-t${i}-0`, repeat: 0, task },
    rolloutOutcome({ stop_reason: 'answered', extracted_answer: 'A', turns: 1, tool_calls: 0, input_tokens: 1, output_tokens: 1, wall_s: 1 }),
    { kind: 'scored', verdict: 'equivalent', reason: '', reward: 1 });
}

describe('reconciling a run after a lost Redis', () => {
  const redis = new Redis(REDIS_URL);
  const prefix = `vcftest-${randomBytes(4).toString('hex')}`;
  const store = new RunStore(redis, prefix);
  const config = ConfigSchema.parse({ policy_model_name: 'p', visual_coding_opencode_judge_model_name: 'j', queues: { prefix } });
  afterEach(async () => {
    await deletePrefix(redis, prefix);
    removeTmpDirs();
  });
  afterAll(() => redis.disconnect());
  const runRecord = (runId: string, own: Pick<RunRecord, 'num_tasks' | 'total' | 'queue_scope' | 'origin'>): RunRecord => ({
    run_id: runId, benchmark: 'b', created_at: '2030-01-01T00:00:00.000Z', num_repeats: 1, output_jsonl_fpath: 'unused.jsonl',
    policy_model: 'p', judge_model: 'j', settings: runSettingsFrom(config), settings_changes: [], ...own,
  });

  it('puts back the file\'s lost rows, produces lost rollouts again once, and leaves live ones alone', async () => {
    const runId = 'rc';
    const run = runRecord(runId, { num_tasks: 3, total: 3, queue_scope: null, origin: 'produce' });
    await store.createRun(run);
    await redis.hset(store.keys.tasks(runId), 't1', '{}', 't2', '{}', 't3', '{}');
    const output = new RunOutput(run, path.join(createTmpDir(), 'out.jsonl'), store, logger);
    await output.open();
    // t1: its row reached the file, and the failover lost it from Redis.
    expect(await output.commit(row(runId, 1))).toBe('new');
    await redis.hdel(store.keys.rows(runId), `${runId}-t1-0`);
    // t2: its rollout ended and its judge job survived. t3: neither a row nor a job survived.
    // Raw data: the reconciler reads any job's rollout id without parsing the rest.
    const judgeQueue = openQueue('judge', redis, prefix) as unknown as Queue;
    await judgeQueue.add('judge', { run_id: runId, rollout_id: `${runId}-t2-0` }, { jobId: `${runId}-t2-0-judge-x` });
    await judgeQueue.close();

    const deps = { redis, config, store, logger, restoreRows: () => output.restoreFromFile() };
    const first = await reconcileRun(deps, run, 'redis back');
    expect(first).toMatchObject({ run_id: runId, reason: 'redis back', restored_rows: 1, reproduced: 1 });
    expect(await store.getRow(runId, `${runId}-t1-0`)).toMatchObject({ rollout_id: `${runId}-t1-0`, reward: 1 });
    const rollouts = openQueue('rollout', redis, prefix);
    const waiting = await rollouts.getJobs(['waiting', 'prioritized', 'delayed']);
    expect(waiting.map((j) => j.id)).toEqual([`${runId}-t3-0`]);
    expect(waiting[0].data).toMatchObject({ run_id: runId, task_id: 't3', repeat: 0 });

    // Nothing is lost any more: a second pass changes nothing (no second job for t3).
    const second = await reconcileRun(deps, run, 'redis back');
    expect(second).toMatchObject({ restored_rows: 0, reproduced: 0 });
    expect(await rollouts.getJobCounts('waiting', 'prioritized')).toMatchObject({ waiting: 1 });
    await rollouts.close();
    output.close();

    expect(await lastReconcile(redis, prefix, runId)).toMatchObject({ restored_rows: 0, reproduced: 0 });
    expect((await runStatus(redis, prefix, runId)).reconciled).toMatchObject({ run_id: runId, reason: 'redis back' });
  });

  it('a serve run: a lost rollout is produced again from its request\'s record; one lost with its record is counted and accepted anew when its client asks again', async () => {
    const runId = 'rs';
    const run = runRecord(runId, { num_tasks: 0, total: 0, queue_scope: runId, origin: 'serve' });
    await store.createRun(run);
    const bounds = { maxImageBytes: 1024 * 1024, maxImages: 4, allowedBaseUrls: [] };
    const parsed = (ng: string) => parseRunBody(gymRow(`Which? ${ng}`, 'B', { _ng_rollout_id: ng, _ng_rollout_index: 2 }, [pngUrl(1)]), bounds);
    const [kept, lost] = [serveRolloutId(runId, 'kept'), serveRolloutId(runId, 'lost')];
    // Both were accepted; the failover kept both names, but only one request's record, and neither job.
    const requests = new RequestStore(redis, prefix);
    await requests.putTask(runId, kept, requestRecord(parsed('kept'), { benchmark: 'b', ngRolloutId: 'kept', responseTtlS: 600, fetchedTtlS: 60 }));
    await redis.sadd(store.keys.enqueued(runId), kept, lost);
    const output = new RunOutput(run, path.join(createTmpDir(), 'out.jsonl'), store, logger);
    await output.open();
    const deps = { redis, config, store, logger, restoreRows: () => output.restoreFromFile() };
    expect(await reconcileRun(deps, run, 'redis back')).toMatchObject({ restored_rows: 0, reproduced: 1, lost_requests: 1 });
    const rollouts = openQueue('rollout', redis, prefix, { scope: runId });
    const jobs = async () => (await rollouts.getJobs(['waiting', 'prioritized', 'delayed'])).map((j) => [j.id, j.data.task_source, j.data.repeat, j.data.task_id]);
    expect(await jobs()).toEqual([[kept, 'request', 2, `request-kept`]]);
    expect(await reconcileRun(deps, run, 'redis back')).toMatchObject({ reproduced: 0, lost_requests: 1 });

    // The lost one's client asks again (POST of the same _ng_rollout_id): accepted anew, with a job.
    const service = new RolloutService({ config, redis, run, logger });
    try {
      expect(await service.accept(parsed('lost'))).toMatchObject({ rolloutId: lost, created: true });
      expect(await service.accept(parsed('kept'))).toMatchObject({ rolloutId: kept, created: false });
    } finally {
      await service.close();
    }
    expect((await jobs()).sort()).toEqual([[kept, 'request', 2, 'request-kept'], [lost, 'request', 2, 'request-lost']]);
    expect(await reconcileRun(deps, run, 'redis back')).toMatchObject({ reproduced: 0, lost_requests: 0 });
    await rollouts.close();
    output.close();
  });
});
