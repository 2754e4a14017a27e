/**
 * `vcfleet run`: the whole fleet on one machine. Uses REDIS_URL or starts a private redis-server,
 * prepares the benchmark when needed, produces the run, runs every role in-process, shows progress,
 * and ends with a summary when every rollout has its row. Stopping (Ctrl-C) hands running rollouts
 * back to the queue; `vcfleet run --run-id <id>` resumes.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { AgentRunner } from '../shared/agent.ts';
import type { Config } from '../shared/config.ts';
import type { Judge } from '../shared/judge.ts';
import type { Logger } from '../shared/logger.ts';
import { openQueue, QUEUE_NAMES } from '../shared/queues.ts';
import { checkRedisServer, createRedis, waitForRedis, type Redis } from '../shared/redis.ts';
import { RunStore } from '../shared/run-store.ts';
import { loadOrPrepare } from '../prepare/load-or-prepare.ts';
import { produceRun } from '../producer/produce.ts';
import { startSandboxWorker } from '../workers/sandbox/worker.ts';
import { createFleetJudge } from '../workers/judge/judge-factory.ts';
import { startJudgeWorker } from '../workers/judge/worker.ts';
import { startResultsWorker } from '../workers/results/worker.ts';
import { metricsPathFor, type AggregateMetrics } from '../workers/results/metrics.ts';
import { resolveOutputPath } from '../workers/results/output-path.ts';
import { startPrivateRedis, type PrivateRedis } from './private-redis.ts';
import { createProgressView, type ProgressView } from './progress.ts';
import { policySilenceWarning, RowTally } from '../shared/row-tally.ts';
import { stripCredentials } from '../shared/run-settings.ts';
import { announceWorker, publishNotice } from '../shared/worker-registry.ts';
import { createAgentRunner } from '../workers/sandbox/agent-factory.ts';
import { unenforcedNotice } from '../workers/sandbox/box-check.ts';
import type { FleetMetrics } from '../ops/prom-metrics.ts';
import { startRoleMetrics } from '../ops/role-metrics.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RunAllOptions {
  config: Config;
  logger: Logger;
  /** Replace the configured agent or judge (the demo, tests). */
  agent?: AgentRunner;
  judge?: Judge;
  /** Stops the run cleanly when aborted (Ctrl-C). */
  signal?: AbortSignal;
  progress?: ProgressView;
  /** Called once the run exists (its id, and how many rollouts it has). */
  onStart?(runId: string, total: number, created: boolean): void;
  /** Give up when nothing is queued or running for this long and rows are missing (ms). Default 15000. */
  stuckAfterMs?: number;
  /** Prometheus hooks (src/ops/prom-metrics.ts); default: the run's own, served on `metrics_server.port` when set. */
  metrics?: FleetMetrics;
}

export interface RunAllResult {
  runId: string;
  status: 'complete' | 'stopped' | 'stuck';
  total: number;
  done: number;
  outputPath: string;
  metricsPath: string;
  metrics: AggregateMetrics | null;
}


export async function runAll(options: RunAllOptions): Promise<RunAllResult> {
  const { logger } = options;
  let config = options.config;
  let privateRedis: PrivateRedis | undefined;
  if (!config.redis_url) {
    privateRedis = await startPrivateRedis({ dir: path.join(config.state_dir, 'redis'), logger });
    config = { ...config, redis_url: privateRedis.url };
  }
  const url = config.redis_url!;
  const client = createRedis(url, 'client');
  const connection = createRedis(url, 'worker');
  const closers: Array<() => Promise<void>> = [];
  try {
    await waitForRedis(client, url);
    await checkRedisServer(client, logger);
    const own = options.metrics ? null : await startRoleMetrics(config, logger, 'run');
    if (own) closers.push(() => own.close());
    const prom = options.metrics ?? own!.metrics;
    prom.watchQueues(client, config.queues.prefix);
    const presence = await announceWorker(connection, config.queues.prefix, 'run');
    closers.push(() => presence.stop());
    const workerName = presence.id;
    const bench = await loadOrPrepare(config, logger);
    const produced = await produceRun({ config, redis: client, logger, tasks: bench.tasks, readImage: bench.readImage });
    const store = new RunStore(client, config.queues.prefix);
    const run = await store.requireRun(produced.runId);
    options.onStart?.(run.run_id, produced.total, produced.created);
    const tally = new RowTally();
    for await (const row of store.scanRows(run.run_id)) tally.add(row);
    const results = startResultsWorker({ config, connection, logger, workerName, onJobEnd: prom.jobEnd('results'), onCommit: (row, result) => {
      prom.rowCommitted(row, result);
      if (row.run_id === run.run_id) tally.add(row);
    } });
    closers.push(() => results.close());
    await results.ready;
    await results.syncRun(run.run_id);
    // Count again: another consumer may have written rows while this one waited for the writer lock.
    for await (const row of store.scanRows(run.run_id)) tally.add(row);
    const judge = await startJudgeWorker({ config, connection, logger, workerName, judge: prom.wrapJudge(options.judge ?? createFleetJudge(config, logger, connection)), onJobEnd: prom.jobEnd('judge') });
    closers.unshift(() => judge.close());
    const agent = options.agent ?? (await createAgentRunner(config, logger, { onBoxReport: (r) => void publishNotice(presence, unenforcedNotice(r, presence.id)) }));
    const sandbox = await startSandboxWorker({ config, connection, logger, workerName, agent: prom.wrapAgent(agent), onJobEnd: prom.jobEnd('rollout') });
    closers.unshift(() => sandbox.close());
    const status = await watch(options, connection, config.queues.prefix, produced.total, tally, logger, config.policy_base_url);
    logger.info({ run: run.run_id, status }, 'run loop ended');
    for (const close of closers.splice(0)) await close();
    const outputPath = resolveOutputPath(run.run_id, run.output_jsonl_fpath, config);
    const metricsPath = metricsPathFor(outputPath);
    const metrics = await readMetrics(metricsPath);
    return { runId: run.run_id, status, total: produced.total, done: tally.counts.done, outputPath, metricsPath, metrics };
  } finally {
    for (const close of closers) await close().catch(() => {});
    client.disconnect();
    connection.disconnect();
    await privateRedis?.stop();
  }
}

/** The metrics file the results consumer wrote at shutdown (null if it could not write one). */
async function readMetrics(file: string): Promise<AggregateMetrics | null> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as AggregateMetrics;
  } catch {
    return null;
  }
}

/**
 * Poll until every rollout has its row and nothing is in flight, or the run is stopped or stuck. It
 * uses a connection that waits out Redis outages, so a Redis restart pauses the loop, not the run.
 */
async function watch(
  options: RunAllOptions,
  connection: Redis,
  prefix: string,
  total: number,
  tally: RowTally,
  logger: Logger,
  policyUrl: string,
): Promise<RunAllResult['status']> {
  const view = options.progress ?? createProgressView();
  const queues = QUEUE_NAMES.map((name) => openQueue(name, connection, prefix));
  let idleSince: number | null = null;
  let warned = false;
  let running = 0;
  try {
    for (;;) {
      if (options.signal?.aborted) return 'stopped';
      let pending: number;
      try {
        const counts = await Promise.all(queues.map((q) => q.getJobCounts('active', 'waiting', 'delayed', 'prioritized')));
        running = counts[0].active ?? 0;
        pending = counts.reduce((n, c) => n + Object.values(c).reduce((a, b) => a + b, 0), 0);
      } catch (err) {
        logger.warn({ err: (err as Error).message }, 'cannot read the queues (Redis unreachable?); waiting');
        await sleep(1000);
        continue;
      }
      view.update({ ...tally.counts, total, running });
      const silence = warned ? null : policySilenceWarning(tally.counts);
      if (silence) {
        warned = true;
        logger.warn(`${silence} Policy endpoint: ${stripCredentials(policyUrl)}`);
      }
      // Complete once every rollout has its row and nothing (a rejudge, a retry) is still in flight.
      if (tally.counts.done >= total && pending === 0) return 'complete';
      if (pending === 0) {
        idleSince ??= Date.now();
        if (Date.now() - idleSince > (options.stuckAfterMs ?? 15_000)) return 'stuck';
      } else idleSince = null;
      await sleep(500);
    }
  } finally {
    view.stop();
    await Promise.allSettled(queues.map((q) => q.close()));
  }
}
