/** `vcfleet worker sandbox|judge|results`: one role of the fleet, on any host with REDIS_URL. */
import type { Command } from 'commander';
import type { Config } from '../../shared/config.ts';
import { ConfigError } from '../../shared/errors.ts';
import type { Redis } from '../../shared/redis.ts';
import type { Cli } from '../context.ts';
import { InFlightJobs } from '../../shared/in-flight-jobs.ts';
import { connect, onShutdownSignals } from '../runtime.ts';
import { createAgentRunner } from '../../workers/sandbox/agent-factory.ts';
import { startSandboxWorker } from '../../workers/sandbox/worker.ts';
import { createFleetJudge } from '../../workers/judge/judge-factory.ts';
import { startJudgeWorker } from '../../workers/judge/worker.ts';
import { startResultsWorker } from '../../workers/results/worker.ts';
import type { FleetMetrics } from '../../ops/prom-metrics.ts';
import path from 'node:path';
import type { QueueName } from '../../shared/queues.ts';
import { RunStore } from '../../shared/run-store.ts';
import type { RoleDeps } from '../../shared/stage-worker.ts';
import { resolveJudgeApiKey } from '../../workers/judge/openai-judge.ts';
import { checkJudge, checkOutputFolder, checkPolicy, requirePassed } from '../../ops/preflight.ts';
import { announceWorker, publishNotice, type WorkerPresence } from '../../shared/worker-registry.ts';
import { unenforcedNotice } from '../../workers/sandbox/box-check.ts';
import { startRoleMetrics } from '../../ops/role-metrics.ts';

/** The roles `vcfleet worker <role>` accepts. */
export const WORKER_ROLES = ['sandbox', 'judge', 'results'] as const;
const ROLES = WORKER_ROLES;
type Role = (typeof ROLES)[number];

export function registerWorker(program: Command, cli: Cli): void {
  program
    .command('worker')
    .description('run one role of the fleet until stopped (SIGINT/SIGTERM stop it cleanly)')
    .argument('<role>', `one of: ${ROLES.join(', ')}`)
    .option('--config <path>', 'config YAML (default configs/visual_coding_opencode.yaml)')
    .option('--concurrency <n>', 'jobs at once in this process (sandbox: queues.rollout_concurrency, a number or auto; judge: judge.concurrency)')
    .option('--run-id <id>', 'serve the own queues of this run (one made by `vcfleet run` or `demo`) instead of the fleet\'s')
    .option('--skip-preflight', 'do not check this host\'s endpoints, keys, sandboxes or output folder first')
    .addHelpText('after', '\nEnvironment: REDIS_URL (all roles), POLICY_API_KEY (sandbox), OPENAI_API_KEY (judge).\nPrometheus: /metrics on metrics_server.port (VCFLEET_METRICS_PORT; 0 = off).')
    .action(async (role: string, opts: { config?: string; concurrency?: string; runId?: string; skipPreflight?: boolean }) => {
      if (!ROLES.includes(role as Role)) throw new ConfigError(`unknown worker role "${role}": use one of ${ROLES.join(', ')}`);
      const flags: Record<string, unknown> = { 'preflight.enabled': opts.skipPreflight ? false : undefined };
      if (opts.concurrency) flags[role === 'judge' ? 'judge.concurrency' : 'queues.rollout_concurrency'] = opts.concurrency === 'auto' ? 'auto' : Number(opts.concurrency);
      const { config, logger } = cli.context(opts, flags);
      const roleMetrics = await startRoleMetrics(config, logger, role);
      const inFlight = new InFlightJobs();
      let connection: Redis | undefined;
      let presence: WorkerPresence | undefined;
      let close: () => Promise<void>;
      try {
        connection = await connect(config, logger, 'worker');
        if (config.preflight.enabled) await preflightRole(role as Role, config);
        roleMetrics.metrics.watchQueues(connection, config.queues.prefix);
        const scope = opts.runId ? await ownQueuesOf(connection, config, opts.runId) : null;
        presence = await announceWorker(connection, config.queues.prefix, role, scope);
        close = await startRole(role as Role, { config, logger, connection, workerName: presence.id, scope, inFlight }, roleMetrics.metrics, presence);
      } catch (err) {
        // An open server or connection would keep a failed process alive.
        await presence?.stop();
        await roleMetrics.close();
        connection?.disconnect();
        throw err;
      }
      const present = presence;
      const conn = connection;
      logger.info({ role, prefix: config.queues.prefix }, `${role} worker started`);
      await new Promise<void>((resolve) => {
        onShutdownSignals(logger, async () => {
          await close();
          await present.stop();
          await roleMetrics.close();
          conn.disconnect();
          resolve();
        }, { inFlight });
      });
      logger.info({ role }, `${role} worker stopped`);
    });
}

/** This host's own endpoints, keys and folders, checked before the role takes any job. */
async function preflightRole(role: Role, config: Config): Promise<void> {
  if (role === 'sandbox' && config.agent.kind === 'opencode') requirePassed([await checkPolicy(config.policy_base_url, config.policy_api_key, null)]);
  if (role === 'judge') requirePassed([await checkJudge(config, resolveJudgeApiKey(config))]);
  if (role === 'results') requirePassed([await checkOutputFolder(path.resolve(config.output_root ?? '.'))]);
}

/** The queue scope of a run served with `--run-id`: its own queues; a run in the fleet's queues needs no flag. */
async function ownQueuesOf(connection: Redis, config: Config, runId: string): Promise<string> {
  const run = await new RunStore(connection, config.queues.prefix).getRun(runId);
  if (!run) throw new ConfigError(`run ${runId} does not exist under the prefix ${config.queues.prefix} of this Redis; check --run-id, REDIS_URL and VCFLEET_PREFIX`);
  if (run.queue_scope === null) throw new ConfigError(`run ${runId} is in the fleet's queues, which every worker serves: start the worker without --run-id`);
  return run.queue_scope;
}

/** Start one role with its metrics hooks; returns its graceful close. */
async function startRole(role: Role, deps: Omit<RoleDeps<QueueName>, 'onJobEnd'>, metrics: FleetMetrics, presence: WorkerPresence): Promise<() => Promise<void>> {
  const { config, logger, connection } = deps;
  if (role === 'sandbox') {
    const runner = await createAgentRunner(config, logger, { onBoxReport: (report) => void publishNotice(presence, unenforcedNotice(report, presence.id)) });
    const w = await startSandboxWorker({ ...deps, agent: metrics.wrapAgent(runner), onJobEnd: metrics.jobEnd('rollout'), onAdmission: (state) => metrics.admission(state) });
    return () => w.close();
  }
  if (role === 'judge') {
    const judge = metrics.wrapJudge(createFleetJudge(config, logger, connection));
    const w = await startJudgeWorker({ ...deps, judge, onJobEnd: metrics.jobEnd('judge') });
    return () => w.close();
  }
  const w = startResultsWorker({ ...deps, onJobEnd: metrics.jobEnd('results'), onCommit: (row, result) => metrics.rowCommitted(row, result) });
  return () => w.close();
}
