/** `vcfleet produce`: create a run and enqueue its rollouts (workers anywhere pick them up). */
import type { Command } from 'commander';
import type { Cli } from '../context.ts';
import { connect } from '../runtime.ts';
import { loadOrPrepare } from '../../prepare/load-or-prepare.ts';
import { produceRun } from '../../producer/produce.ts';
import { checkRedisPersistence, requirePassed } from '../../ops/preflight.ts';
import { differencesText, runSettingsText } from '../settings-text.ts';
import { vcfleetCommand } from '../../shared/text/advice.ts';

export function registerProduce(program: Command, cli: Cli): void {
  program
    .command('produce')
    .description('create a run and enqueue one rollout job per task per repeat (idempotent for the same --run-id)')
    .option('--config <path>', 'config YAML')
    .option('--benchmark <name>', 'babyvision_opencode or babyvision_opencode_question_only')
    .option('--run-id <id>', 'run id (default: a new one); the same id adds nothing twice')
    .option('--skip-preflight', 'do not check that Redis keeps its data first')
    .action(async (opts: { config?: string; benchmark?: string; runId?: string; skipPreflight?: boolean }) => {
      const { config, logger } = cli.context(opts, { benchmark: opts.benchmark, run_id: opts.runId, 'preflight.enabled': opts.skipPreflight ? false : undefined });
      const redis = await connect(config, logger, 'client');
      try {
        // The endpoints and keys belong to the workers' hosts, which check them at start; here, Redis.
        if (config.preflight.enabled && config.preflight.require_redis_persistence) requirePassed([await checkRedisPersistence(redis)]);
        const bench = await loadOrPrepare(config, logger);
        const result = await produceRun({
          config, redis, logger, tasks: bench.tasks, readImage: bench.readImage,
          onProgress: (done, total) => logger.info({ done, total }, 'enqueueing rollouts'),
        });
        process.stdout.write(
          `run ${result.runId}: ${result.total} rollouts, ${result.enqueued} enqueued now${result.created ? '' : ' (run existed)'}\n` +
            `${result.differences.length ? differencesText(result.runId, result.differences) : runSettingsText(result.runId, result.settings, result.output)}\n` +
            `watch it: ${vcfleetCommand(`status --run-id ${result.runId}`)}\n`,
        );
      } finally {
        redis.disconnect();
      }
    });
}
