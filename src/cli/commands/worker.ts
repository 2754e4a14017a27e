/** `vcfleet worker sandbox|judge|results`: one role of the fleet, on any host with REDIS_URL. */
import type { Command } from 'commander';
import type { Config } from '../../shared/config.ts';
import { ConfigError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Redis } from '../../shared/redis.ts';
import { commandContext } from '../context.ts';
import { connect, onShutdownSignals } from '../runtime.ts';
import { createAgentRunner } from '../../workers/sandbox/agent-factory.ts';
import { startSandboxWorker } from '../../workers/sandbox/worker.ts';
import { createFleetJudge } from '../../workers/judge/judge-factory.ts';
import { startJudgeWorker } from '../../workers/judge/worker.ts';
import { startResultsWorker } from '../../workers/results/worker.ts';

const ROLES = ['sandbox', 'judge', 'results'] as const;
type Role = (typeof ROLES)[number];

export function registerWorker(program: Command): void {
  program
    .command('worker')
    .description('run one role of the fleet until stopped (SIGINT/SIGTERM stop it cleanly)')
    .argument('<role>', `one of: ${ROLES.join(', ')}`)
    .option('--config <path>', 'config YAML (default configs/visual_coding_opencode.yaml)')
    .option('--concurrency <n>', 'jobs at once in this process (sandbox: queues.rollout_concurrency; judge: judge.concurrency)')
    .addHelpText('after', '\nEnvironment: REDIS_URL (all roles), POLICY_API_KEY (sandbox), OPENAI_API_KEY (judge).')
    .action(async (role: string, opts: { config?: string; concurrency?: string }) => {
      if (!ROLES.includes(role as Role)) throw new ConfigError(`unknown worker role "${role}": use one of ${ROLES.join(', ')}`);
      const flags: Record<string, unknown> = {};
      if (opts.concurrency) flags[role === 'judge' ? 'judge.concurrency' : 'queues.rollout_concurrency'] = Number(opts.concurrency);
      const { config, logger } = commandContext(opts, flags);
      const connection = await connect(config, logger, 'worker');
      const close = await startRole(role as Role, config, logger, connection);
      logger.info({ role, prefix: config.queues.prefix }, `${role} worker started`);
      await new Promise<void>((resolve) => {
        onShutdownSignals(logger, async () => {
          await close();
          connection.disconnect();
          resolve();
        });
      });
      logger.info({ role }, `${role} worker stopped`);
    });
}

async function startRole(role: Role, config: Config, logger: Logger, connection: Redis): Promise<() => Promise<void>> {
  if (role === 'sandbox') {
    const agent = await createAgentRunner(config, logger);
    const w = await startSandboxWorker({ config, connection, logger, agent });
    return () => w.close();
  }
  if (role === 'judge') {
    const w = await startJudgeWorker({ config, connection, logger, judge: createFleetJudge(config, logger, connection) });
    return () => w.close();
  }
  const w = startResultsWorker({ config, connection, logger });
  return () => w.close();
}
