/**
 * `vcfleet worker judge`: grades answered rollouts under a fleet-wide rate limit (BullMQ's limiter is
 * shared through Redis, so a hundred judge-workers never overrun the judge's quota).
 */
import { errorMessage } from '../../shared/errors.ts';
import { Releasers } from '../../shared/releasers.ts';
import type { Judge } from '../../shared/ports/judge.ts';
import { enqueue, openQueue } from '../../shared/queue/registry.ts';
import { RunStore } from '../../shared/stores/run-store.ts';
import { RequestStore } from '../../shared/stores/request-store.ts';
import { startStageWorker, type RoleDeps, type StageWorker } from '../../shared/queue/stage-worker.ts';
import { judgeFailedRow, runJudgeStage } from './judge-stage.ts';
import { judgeLimiter } from './limiter.ts';
import { RunSettingConflicts } from '../settings-conflicts.ts';

export interface JudgeWorkerDeps extends RoleDeps<'judge'> {
  judge: Judge;
}

export async function startJudgeWorker(deps: JudgeWorkerDeps): Promise<StageWorker<'judge'>> {
  const { config, connection, logger } = deps;
  const prefix = config.queues.prefix;
  const scope = deps.scope ?? null;
  // Runs, tasks and images never change once produced: read each once per process.
  const store = new RunStore(connection, prefix, { cache: true });
  const requests = new RequestStore(connection, prefix);
  const results = openQueue('results', connection, prefix, { policy: config.queues, scope });
  const conflicts = new RunSettingConflicts(config, 'judge', logger);
  const stage = startStageWorker({
    queue: 'judge',
    connection,
    prefix,
    concurrency: config.judge.concurrency,
    lockDurationMs: Math.max(config.queues.lock_duration_ms, 10_000),
    name: deps.workerName,
    inFlight: deps.inFlight,
    scope,
    limiter: judgeLimiter(config),
    logger,
    onJobEnd: deps.onJobEnd,
    onStall: deps.onStall,
    async handle(data, ctx) {
      conflicts.check(await store.requireRun(data.run_id));
      const row = await runJudgeStage(data, { store, requests, judge: deps.judge }, ctx.signal);
      await enqueue('results', results, { v: 1, row });
    },
    async onFinalFailure(data, error) {
      // Something other than the judge call failed (a bug or Redis): still one masked, rejudgeable row.
      await enqueue('results', results, { v: 1, row: await judgeFailedRow(data, store, errorMessage(error), 'unavailable', requests) });
    },
  });
  const releasers = new Releasers(logger);
  releasers.add('close the judge', () => deps.judge.close());
  releasers.add('close the results queue', () => results.close());
  let grace = 30_000;
  releasers.add('stop the judge worker', () => stage.close(grace));
  return {
    get worker() {
      return stage.worker;
    },
    close(graceMs = 30_000) {
      grace = graceMs;
      return releasers.release();
    },
  };
}
