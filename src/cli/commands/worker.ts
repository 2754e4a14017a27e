/** `vcfleet worker sandbox|judge|results`: one role of the fleet, on any host with REDIS_URL. */
import type { Command } from 'commander';
import type { Config } from '../../shared/config/load.ts';
import { ConfigError } from '../../shared/errors.ts';
import { InFlightJobs } from '../../shared/queue/in-flight-jobs.ts';
import type { Redis } from '../../shared/redis/connect.ts';
import { Releasers } from '../../shared/releasers.ts';
import { RunStore } from '../../shared/stores/run-store.ts';
import { STAGES } from '../../shared/queue/registry.ts';
import { stageOf, WORKER_ROLES, type WorkerRole } from '../../shared/queue/worker-registry.ts';
import { startRoleMetrics } from '../../ops/role-metrics.ts';
import { startProcessRoles, type StartedRoles } from '../../workers/process-roles.ts';
import { positiveOption, watchLifetime } from '../../workers/lifetime.ts';
import type { Cli } from '../context.ts';
import { connect, exitSoon, onShutdownSignals } from '../runtime.ts';

export { WORKER_ROLES } from '../../shared/queue/worker-registry.ts';

export function registerWorker(program: Command, cli: Cli): void {
  program
    .command('worker')
    .description('run one role of the fleet until stopped (SIGINT/SIGTERM stop it cleanly)')
    .argument('<role>', `one of: ${WORKER_ROLES.join(', ')}`)
    .option('--config <path>', 'config YAML (default configs/visual_coding_opencode.yaml)')
    .option('--concurrency <n>', 'jobs at once in this process (sandbox: queues.rollout_concurrency, a number or auto; judge: judge.concurrency)')
    .option('--run-id <id>', 'serve the own queues of this run (one made by `vcfleet run` or `demo`) instead of the fleet\'s')
    .option('--skip-preflight', 'do not check this host\'s endpoints, keys, sandboxes or output folder first')
    .option('--max-jobs <n>', 'exit after n jobs ended here (one pod per rollout: a KEDA ScaledJob); a job fetched past it goes back to the queue')
    .option('--idle-exit <s>', 'exit after s seconds with no job')
    .option('--drain-grace <s>', 'on SIGUSR2 (bin/vcfleet-drain.js): take no more jobs, give running ones s seconds to finish, hand back the rest, exit (default: task_timeout_s)')
    .addHelpText('after', '\nEnvironment: REDIS_URL (all roles), POLICY_API_KEY (sandbox), OPENAI_API_KEY (judge).\nPrometheus: /metrics on metrics_server.port (VCFLEET_METRICS_PORT; 0 = off).\nSignals: SIGINT/SIGTERM stop (running jobs go back to the queue); SIGUSR2 drains (running jobs finish first).')
    .action(async (role: string, opts: WorkerOptions) => {
      if (!WORKER_ROLES.includes(role as WorkerRole)) throw new ConfigError(`unknown worker role "${role}": use one of ${WORKER_ROLES.join(', ')}`);
      const maxJobs = positiveOption('--max-jobs', opts.maxJobs);
      const idleExitS = positiveOption('--idle-exit', opts.idleExit);
      const drainS = positiveOption('--drain-grace', opts.drainGrace);
      const flags: Record<string, unknown> = { 'preflight.enabled': opts.skipPreflight ? false : undefined };
      if (opts.concurrency) flags[STAGES[stageOf(role as WorkerRole)].concurrencyKey] = opts.concurrency === 'auto' ? 'auto' : Number(opts.concurrency);
      const { config, logger } = cli.context(opts, flags);
      // Everything this process holds, released newest first on every path (a failed start too).
      const releasers = new Releasers(logger);
      const inFlight = new InFlightJobs();
      let workers: StartedRoles = {};
      try {
        const roleMetrics = await startRoleMetrics(config, logger, role);
        releasers.add('stop the metrics server', () => roleMetrics.close());
        const connection = await connect(config, logger, 'worker');
        releasers.add('close the Redis connection', () => connection.disconnect());
        const runId = opts.runId;
        ({ workers } = await startProcessRoles({
          config, logger, connection, releasers, inFlight, roles: new Set([role as WorkerRole]), worker: true, metrics: roleMetrics.metrics,
          // This host's own endpoints, keys and folders, checked before the role takes any job.
          preflight: { model: null },
          scope: runId ? () => ownQueuesOf(connection, config, runId) : null,
        }));
      } catch (err) {
        await releasers.release().catch(() => undefined);
        throw err;
      }
      logger.info({ role, prefix: config.queues.prefix }, `${role} worker started`);
      const stopped = await new Promise<boolean>((resolve) => {
        const release = () => releasers.release().then(() => resolve(true), () => resolve(false));
        // Stop taking jobs; running ones get graceMs to finish, then go back to the queue; then release the rest.
        const stopWithin = (graceMs: number) =>
          void Promise.allSettled(Object.values(workers).map((w) => w.close(graceMs))).then(release);
        onShutdownSignals(logger, release, { inFlight });
        const drainMs = (drainS ?? config.task_timeout_s) * 1000;
        process.once('SIGUSR2', () => {
          logger.info({ role, running: inFlight.size, drain_grace_s: drainMs / 1000 }, 'SIGUSR2: draining: taking no more jobs; running ones finish (or go back to the queue after the drain grace), then exit');
          stopWithin(drainMs);
        });
        watchLifetime({
          inFlight, maxJobs, idleExitS,
          stop: (reason) => {
            logger.info({ role }, `exiting: ${reason}`);
            stopWithin(0);
          },
        });
      });
      logger.info({ role }, stopped ? `${role} worker stopped` : `${role} worker stopped, but some of it could not be released (logged above)`);
      if (!stopped) process.exitCode = 1;
      exitSoon();
    });
}

interface WorkerOptions {
  config?: string;
  concurrency?: string;
  runId?: string;
  skipPreflight?: boolean;
  maxJobs?: string;
  idleExit?: string;
  drainGrace?: string;
}

/** The queue scope of a run served with `--run-id`: its own queues; a run in the fleet's queues needs no flag. */
async function ownQueuesOf(connection: Redis, config: Config, runId: string): Promise<string> {
  const run = await new RunStore(connection, config.queues.prefix).getRun(runId);
  if (!run) throw new ConfigError(`run ${runId} does not exist under the prefix ${config.queues.prefix} of this Redis; check --run-id, REDIS_URL and VCFLEET_PREFIX`);
  if (run.queue_scope === null) throw new ConfigError(`run ${runId} is in the fleet's queues, which every worker serves: start the worker without --run-id`);
  return run.queue_scope;
}
