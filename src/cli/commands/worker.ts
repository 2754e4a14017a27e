/** `vcfleet worker sandbox|judge|results`: one role of the fleet, on any host with REDIS_URL. */
import type { Command } from 'commander';
import type { Config } from '../../shared/config.ts';
import { ConfigError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Redis } from '../../shared/redis.ts';
import type { Cli } from '../context.ts';
import { connect, onShutdownSignals } from '../runtime.ts';
import { createAgentRunner } from '../../workers/sandbox/agent-factory.ts';
import { startSandboxWorker } from '../../workers/sandbox/worker.ts';
import { createFleetJudge } from '../../workers/judge/judge-factory.ts';
import { startJudgeWorker } from '../../workers/judge/worker.ts';
import { startResultsWorker } from '../../workers/results/worker.ts';
import type { FleetMetrics } from '../../ops/prom-metrics.ts';
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
    .option('--concurrency <n>', 'jobs at once in this process (sandbox: queues.rollout_concurrency; judge: judge.concurrency)')
    .addHelpText('after', '\nEnvironment: REDIS_URL (all roles), POLICY_API_KEY (sandbox), OPENAI_API_KEY (judge).\nPrometheus: /metrics on metrics_server.port (VCFLEET_METRICS_PORT; 0 = off).')
    .action(async (role: string, opts: { config?: string; concurrency?: string }) => {
      if (!ROLES.includes(role as Role)) throw new ConfigError(`unknown worker role "${role}": use one of ${ROLES.join(', ')}`);
      const flags: Record<string, unknown> = {};
      if (opts.concurrency) flags[role === 'judge' ? 'judge.concurrency' : 'queues.rollout_concurrency'] = Number(opts.concurrency);
      const { config, logger } = cli.context(opts, flags);
      const roleMetrics = await startRoleMetrics(config, logger, role);
      let connection: Redis | undefined;
      let presence: WorkerPresence | undefined;
      let close: () => Promise<void>;
      try {
        connection = await connect(config, logger, 'worker');
        roleMetrics.metrics.watchQueues(connection, config.queues.prefix);
        presence = await announceWorker(connection, config.queues.prefix, role);
        close = await startRole(role as Role, config, logger, connection, roleMetrics.metrics, presence);
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
        });
      });
      logger.info({ role }, `${role} worker stopped`);
    });
}

/** Start one role with its metrics hooks; returns its graceful close. */
async function startRole(role: Role, config: Config, logger: Logger, connection: Redis, metrics: FleetMetrics, presence: WorkerPresence): Promise<() => Promise<void>> {
  const workerName = presence.id;
  if (role === 'sandbox') {
    const runner = await createAgentRunner(config, logger, { onBoxReport: (report) => void publishNotice(presence, unenforcedNotice(report, presence.id)) });
    const w = await startSandboxWorker({ config, connection, logger, agent: metrics.wrapAgent(runner), onJobEnd: metrics.jobEnd('rollout'), workerName });
    return () => w.close();
  }
  if (role === 'judge') {
    const judge = metrics.wrapJudge(createFleetJudge(config, logger, connection));
    const w = await startJudgeWorker({ config, connection, logger, judge, onJobEnd: metrics.jobEnd('judge'), workerName });
    return () => w.close();
  }
  const w = startResultsWorker({ config, connection, logger, onJobEnd: metrics.jobEnd('results'), onCommit: (row, result) => metrics.rowCommitted(row, result), workerName });
  return () => w.close();
}
