/**
 * `vcfleet run`: the whole fleet on one machine. Uses REDIS_URL or starts a private redis-server,
 * checks the endpoints, keys and sandboxes before anything is enqueued (preflight), prepares the
 * benchmark when needed and produces the run with queues of its own (or resumes it from Redis alone),
 * runs every role in-process on those queues, shows progress, and ends with a summary when every
 * rollout has its row. Stopping (Ctrl-C) hands running rollouts back to the queue with their attempt
 * kept; `vcfleet run --run-id <id>` resumes.
 */
import type { PolicySettings } from '../shared/config/run-settings.ts';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { AgentRunner } from '../shared/ports/agent.ts';
import type { Config } from '../shared/config/load.ts';
import type { Judge } from '../shared/ports/judge.ts';
import type { Logger } from '../shared/logger.ts';
import { checkRedisDeployment, checkRedisServer, createRedis, resolveRedisEndpoint, waitForRedis, type Redis } from '../shared/redis/connect.ts';
import { watchRedisHealth } from '../shared/redis/health.ts';
import { RunStore, runSettings, type RunOrigin, type RunRecord } from '../shared/stores/run-store.ts';
import { holdRunSettings, type HoldOptions } from '../ops/asked-settings.ts';
import { settleWithin } from '../shared/settle-within.ts';
import { stripCredentials } from '../shared/config/run-settings.ts';
import { loadOrPrepare } from '../prepare/load-or-prepare.ts';
import { newRunId, outputOfNewRun, produceRun, resumeRun, type ProduceResult } from '../producer/produce.ts';
import { claimOutput } from '../shared/stores/output-claim.ts';
import { Releasers } from '../shared/releasers.ts';
import { metricsPathFor, type AggregateMetrics } from '../shared/output/metrics.ts';
import { resolveOutputPath } from '../shared/output/output-path.ts';
import { pricingOf } from '../shared/output/run-pricing.ts';
import type { FleetMetrics } from '../shared/ports/telemetry.ts';
import { checkRedisPersistence } from '../ops/preflight.ts';
import { openPrivateRedis } from './private-redis.ts';
import { createProgressView, type ProgressView } from './progress.ts';
import { noRoles, startRunRoles, type RunRoles } from './run-roles.ts';
import { WORKER_ROLES, type WorkerRole } from '../shared/queue/worker-registry.ts';
import { preflightRoles, type RolesPreflight } from '../workers/process-roles.ts';
import { ConfigError } from '../shared/errors.ts';
import type { InFlightJobs } from '../shared/queue/in-flight-jobs.ts';
import { watchRun, type WatchStatus } from './run-watch.ts';
import { shellWord, vcfleetCommand } from '../shared/text/advice.ts';

export interface RunAllOptions {
  config: Config;
  logger: Logger;
  /** Replace the configured agent or judge (the demo, tests). */
  agent?: AgentRunner;
  judge?: Judge;
  /** The first Ctrl-C: stop taking jobs and hand running rollouts back to the queue, attempts kept. */
  signal?: AbortSignal;
  /** This process's held jobs, handed back when a second Ctrl-C exits at once. */
  inFlight?: InFlightJobs;
  progress?: ProgressView;
  /** Called once the run exists (its id, and how many rollouts it has). */
  onStart?(runId: string, total: number, created: boolean): void;
  /** Give up when nothing of the run is queued or running for this long and rows are missing (ms). Default 15000. */
  stuckAfterMs?: number;
  /** Prometheus hooks (src/ops/prom-metrics.ts); default: the run's own, served on `metrics_server.port` when set. */
  metrics?: FleetMetrics;
  /** What makes a new run: `run` (default) or `demo` (so that `vcfleet run --run-id` resumes it as one). */
  origin?: RunOrigin;
  /**
   * Finish work `retry` or `rejudge` sent back: the run must exist, and only `roles` run here (the
   * ones no live worker serves; none: watch the rows others commit). Without the sandbox role nothing
   * is produced and the policy is not checked; without the judge, the judge is not.
   */
  requeued?: { roles: ReadonlySet<WorkerRole> };
  /** The run settings this command names: an existing run with others is refused (or changed, with `update`) before anything starts. */
  settings?: HoldOptions;
  /** Redis gave an answer it will repeat (MOVED, CROSSSLOT, NOAUTH; logged with its fix): stop the run. */
  onFatalRedis?(): void;
}

/** How long stopping the roles may take at the end of a run before the run ends anyway (ms). */
const SHUTDOWN_BOUND_MS = 15_000;

export interface RunAllResult {
  runId: string;
  status: WatchStatus;
  /** Why the run was paused. */
  reason?: string;
  total: number;
  done: number;
  masked: number;
  outputPath: string;
  metricsPath: string;
  metrics: AggregateMetrics | null;
}

/** `vcfleet run --run-id` named a demo run: resume it with the demo's servers (runDemo). */
export class DemoRunToResume extends Error {
  override name = 'DemoRunToResume';
  constructor(readonly runId: string) {
    super(`run ${runId} is a demo run: resume it with \`${vcfleetCommand(`demo --run-id ${runId}`)}\``);
  }
}

/** Preflight of a run: Redis keeps its data, and the roles run here pass theirs (the policy endpoint serves the model, the judge takes its key). */
function runPreflight(options: RunAllOptions, config: Config, client: Redis, model: string, policy: PolicySettings): RolesPreflight {
  return {
    model,
    policy,
    also: () => (config.preflight.require_redis_persistence ? [checkRedisPersistence(client)] : []),
    hint: options.origin === 'demo' ? '++preflight.enabled=false' : undefined,
  };
}

/** The run: resumed from Redis when it exists (nothing prepared), else prepared and produced with its own queues. */
async function produceOrResume(config: Config, client: Redis, logger: Logger, origin: RunOrigin, existing: RunRecord | null): Promise<ProduceResult> {
  if (existing) return resumeRun({ config, redis: client, logger, runId: existing.run_id });
  const bench = await loadOrPrepare(config, logger);
  return produceRun({ config, redis: client, logger, tasks: bench.tasks, readImage: bench.readImage, ownQueues: true, origin });
}

export async function runAll(options: RunAllOptions): Promise<RunAllResult> {
  const { logger } = options;
  let config = options.config;
  const roles: ReadonlySet<WorkerRole> = options.requeued?.roles ?? new Set(WORKER_ROLES);
  // Everything the run holds, released newest first on every path; each failure is logged.
  const releasers = new Releasers(logger);
  // A private Redis only when no Redis is configured at all (no URL, no sentinels, no cluster).
  if (!config.redis_url && config.redis.sentinels.length === 0 && !config.redis.cluster) {
    const privateRedis = await openPrivateRedis({ dir: path.join(config.state_dir, 'redis'), logger });
    releasers.add('stop the private Redis', () => privateRedis.stop());
    config = { ...config, redis_url: privateRedis.url };
  }
  const endpoint = resolveRedisEndpoint(config);
  const client = createRedis(endpoint, 'client');
  const connection = createRedis(endpoint, 'worker');
  releasers.add('close the Redis connections', () => {
    client.disconnect();
    connection.disconnect();
  });
  try {
    await waitForRedis(client, endpoint, config.redis.connect_timeout_s * 1000);
    await checkRedisDeployment(client, endpoint, config.queues.prefix);
    await checkRedisServer(client, logger);
    watchRedisHealth(connection, { logger, display: endpoint.display, onFatal: () => options.onFatalRedis?.() });
    // The run id first: the run's own queues, and this process's record as their worker, are named by it.
    config = { ...config, run_id: config.run_id ?? newRunId(config.benchmark) };
    const store = new RunStore(client, config.queues.prefix);
    const found = await store.getRun(config.run_id!);
    const existing = found && options.settings && !options.requeued ? await holdRunSettings(store, found, config, options.settings) : found;
    if (options.requeued && !existing) {
      throw new ConfigError(`run ${config.run_id} does not exist under the prefix ${config.queues.prefix} of this Redis; check --run-id, REDIS_URL and queues.prefix (VCFLEET_PREFIX)`);
    }
    // A demo run needs the demo's scripted servers for its policy and judge: the caller resumes it as a demo.
    const modelRoles = roles.has('sandbox') || roles.has('judge');
    if (existing?.origin === 'demo' && options.origin !== 'demo' && modelRoles) throw new DemoRunToResume(existing.run_id);
    // A serve run has no task list to finish: its tasks come by request.
    if (existing?.origin === 'serve' && !options.requeued) {
      throw new ConfigError(`run ${existing.run_id} is a \`vcfleet serve\` run, whose tasks come by request: serve it with \`vcfleet serve --run-id ${existing.run_id}\` (--with-workers, or workers started with --run-id)`);
    }
    // The output file is this run's alone while it lives: a second run naming it is refused here, before anything starts.
    if (roles.has('results')) await claimOutputOf(config, client, existing, releasers, logger);
    const preflight = runPreflight(options, config, client, existing?.policy_model ?? config.policy_model_name, existing ? runSettings(existing).policy : config.policy);
    let fleet: RunRoles & { run: RunRecord };
    if (roles.size === 0) {
      await preflightRoles(config, roles, preflight, { outputFolder: false });
      fleet = await noRoles(connection, config.queues.prefix, existing!);
    } else {
      fleet = await startRun(options, config, client, connection, existing, roles, releasers, preflight);
    }
    // A serve run's total is the rollouts it accepted (its record counts no task list).
    const run = { ...fleet.run, total: await store.totalOf(fleet.run) };
    const watched = await watchRun({
      connection, prefix: config.queues.prefix, run, tally: fleet.tally, view: options.progress ?? createProgressView(), logger,
      signal: options.signal, policyUrl: stripCredentials(config.policy_base_url), stuckAfterMs: options.stuckAfterMs ?? 15_000,
      failFastAfter: config.queues.fail_fast_after, policyFailures: fleet.policyFailures, held: fleet.held, pace: fleet.pace,
      refresh: fleet.commitsRows ? undefined : fleet.refresh, outageLimitMs: config.redis.outage_limit_s * 1000,
    });
    logger.info({ run_id: run.run_id, status: watched.status }, 'run loop ended');
    // Stopped or paused: running rollouts and gradings go back to the queue at once, attempts kept.
    // Stopping is bounded even with Redis gone: what could not be handed back comes back when its locks expire.
    const atOnce = watched.status !== 'complete' && watched.status !== 'stuck';
    if (!(await settleWithin(fleet.close(atOnce ? 0 : 5_000), SHUTDOWN_BOUND_MS))) {
      logger.warn({ bound_s: SHUTDOWN_BOUND_MS / 1000 }, 'the roles did not stop in time (Redis gone?); the jobs they held come back when their locks expire');
    }
    const outputPath = resolveOutputPath(run.run_id, run.output_jsonl_fpath, config);
    const metricsPath = metricsPathFor(outputPath);
    const { num_rollouts: done, num_masked: masked } = fleet.tally.counts;
    // The metrics file is this process's when it committed the rows; else the tally read from Redis says the same.
    const metrics = fleet.commitsRows ? await readMetrics(metricsPath) : fleet.tally.metrics.result(run.num_repeats, pricingOf(run));
    return { runId: run.run_id, ...watched, total: run.total, done, masked, outputPath, metricsPath, metrics };
  } finally {
    await releasers.release().catch(() => undefined); // each failure is logged by the releasers
  }
}

/** Claim the run's output file (released with the run), or refuse naming the live run that writes it. */
async function claimOutputOf(config: Config, client: Redis, existing: RunRecord | null, releasers: Releasers, logger: Logger): Promise<void> {
  const runId = config.run_id!;
  const file = resolveOutputPath(runId, existing?.output_jsonl_fpath ?? outputOfNewRun(config, runId), config);
  const otherOutput = shellWord(`++output_jsonl_fpath=${path.join(path.dirname(file), `${runId}.jsonl`)}`);
  const claim = await claimOutput({ redis: client, prefix: config.queues.prefix, file, runId, companions: [metricsPathFor(file)], otherOutput, logger });
  releasers.add('release the claim of the output file', () => claim.release());
}

/** The roles of this process started on the run (produced or resumed first when the sandbox role runs here). */
function startRun(
  options: RunAllOptions, config: Config, client: Redis, connection: Redis, existing: RunRecord | null, roles: ReadonlySet<WorkerRole>, releasers: Releasers,
  preflight: RolesPreflight,
): Promise<RunRoles & { run: RunRecord }> {
  const { logger } = options;
  return startRunRoles({
    config, logger, connection, releasers, inFlight: options.inFlight, roles, preflight,
    // The run's own queues, and this process's record as their worker, are named by the run id.
    scope: existing ? existing.queue_scope : config.run_id,
    metrics: options.metrics ?? { own: 'run' },
    queueDepthsVia: client,
    agent: options.agent,
    judge: options.judge,
    // The agent runner is built (and its sandboxes checked) by now: a box that cannot hold failed before anything was enqueued.
    async run() {
      // Without the sandbox role here (a rejudge), nothing is produced: the run is as Redis holds it.
      const produced = roles.has('sandbox') ? await produceOrResume(config, client, logger, options.origin ?? 'run', existing) : null;
      const run = await new RunStore(client, config.queues.prefix).requireRun(produced?.runId ?? existing!.run_id);
      options.onStart?.(run.run_id, produced?.total ?? run.total, produced?.created ?? false);
      return run;
    },
  });
}

/** The metrics file the results consumer wrote at shutdown (null if it could not write one). */
async function readMetrics(file: string): Promise<AggregateMetrics | null> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as AggregateMetrics;
  } catch {
    return null;
  }
}
