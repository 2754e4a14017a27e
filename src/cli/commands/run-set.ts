/**
 * `vcfleet run-set` (a run's settings after it was produced) and `vcfleet fleet-set` (the fleet-wide
 * rollout cap of a queue): the two places a setting that is not a host's own can change.
 */
import type { Command } from 'commander';
import { ConfigError } from '../../shared/errors.ts';
import { openQueue } from '../../shared/queue/registry.ts';
import { shownValue } from '../../shared/config/run-settings.ts';
import { RUN_RECORD_CACHE_MS, RunStore } from '../../shared/stores/run-store.ts';
import { setRunSettings } from '../../ops/run-set.ts';
import type { Cli } from '../context.ts';
import { connect } from '../runtime.ts';

/** Keys that say where and how this command itself runs (which Redis, which prefix, its logs), not what it sets. */
const COMMAND_KEYS = new Set(['redis_url', 'queues.prefix', 'redis.connect_timeout_s', 'log_level', 'log_json', 'debug']);

/** The keys of this invocation's `++key=value` overrides that it is asked to set. */
function overrideKeys(cli: Cli): string[] {
  return cli.overrides.map((o) => o.slice(2, o.indexOf('=') > 2 ? o.indexOf('=') : undefined)).filter((k) => !COMMAND_KEYS.has(k));
}

export function registerRunSet(program: Command, cli: Cli): void {
  program
    .command('run-set')
    .description('change run settings of a run (++key=value): refused once rollouts of it finished, unless --force')
    .requiredOption('--run-id <id>', 'the run')
    .option('--force', 'change it although rollouts finished (recorded in the run record)')
    .option('--config <path>', 'config YAML')
    .action(async (opts: { runId: string; force?: boolean; config?: string }) => {
      const { config, logger } = cli.context(opts);
      const redis = await connect(config, logger, 'client');
      try {
        const { change } = await setRunSettings(new RunStore(redis, config.queues.prefix), opts.runId, overrideKeys(cli), config, opts.force ?? false);
        if (!change) {
          process.stdout.write(`run ${opts.runId} already has these settings; nothing changed\n`);
          return;
        }
        logger.warn({ run_id: opts.runId, changes: change.changes, forced: change.forced, finished_rollouts: change.finished_rollouts }, 'run settings changed');
        const lines = change.changes.map((c) => `  ${c.key}: ${shownValue(c.from)} -> ${shownValue(c.to)}`);
        process.stdout.write(
          `run ${opts.runId}: settings changed${change.forced ? ` (forced, after ${change.finished_rollouts} finished rollouts; recorded)` : ''}\n${lines.join('\n')}\n` +
            `workers use them for the rollouts and gradings they start from now on (within ${RUN_RECORD_CACHE_MS / 1000} s)\n`,
        );
      } finally {
        redis.disconnect();
      }
    });
}

export function registerFleetSet(program: Command, cli: Cli): void {
  program
    .command('fleet-set')
    .description('set the fleet-wide rollout cap: ++queues.rollout_global_concurrency=N (of the fleet\'s queue, or of a run\'s own with --run-id)')
    .option('--run-id <id>', 'the run whose own queue to cap (a run made by vcfleet run)')
    .option('--config <path>', 'config YAML')
    .action(async (opts: { runId?: string; config?: string }) => {
      const keys = overrideKeys(cli);
      const other = keys.filter((k) => k !== 'queues.rollout_global_concurrency');
      if (keys.length === 0 || other.length) {
        throw new ConfigError(`fleet-set sets ++queues.rollout_global_concurrency=N only${other.length ? `, not ${other.join(', ')}` : ''}; run settings change with vcfleet run-set, host settings in each host's configuration`);
      }
      const { config, logger } = cli.context(opts);
      const redis = await connect(config, logger, 'client');
      try {
        const run = opts.runId ? await new RunStore(redis, config.queues.prefix).getRun(opts.runId) : null;
        if (opts.runId && !run) throw new ConfigError(`run ${opts.runId} does not exist under the prefix ${config.queues.prefix}; check --run-id, REDIS_URL and VCFLEET_PREFIX`);
        const scope = run?.queue_scope ?? null;
        const queue = openQueue('rollout', redis, config.queues.prefix, { scope });
        try {
          const before = await queue.getGlobalConcurrency();
          const cap = config.queues.rollout_global_concurrency;
          await queue.setGlobalConcurrency(cap);
          const which = scope === null ? `the fleet's rollout queue (prefix ${config.queues.prefix})` : `the own rollout queue of run ${scope}`;
          logger.info({ queue: queue.name, before, cap }, 'rollout cap set');
          process.stdout.write(`${which}: at most ${cap} rollouts at once over all workers (was ${before ?? 'unset'})${run && scope === null ? `; run ${run.run_id} is in the fleet's queue, shared with every run of the prefix` : ''}\n`);
        } finally {
          await queue.close();
        }
      } finally {
        redis.disconnect();
      }
    });
}
