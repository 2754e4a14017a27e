/** `vcfleet runs`: the recent runs of the prefix, one line each, newest first. */
import { terminalText } from '../../shared/text/terminal-text.ts';
import type { Command } from 'commander';
import { ConfigError } from '../../shared/errors.ts';
import { RunStore } from '../../shared/stores/run-store.ts';
import { recentRuns, type RecentRun } from '../../ops/recent-runs.ts';
import type { Cli } from '../context.ts';
import { percent } from '../metrics-table.ts';
import { table } from '../runtime.ts';
import { connectToRuns } from '../run-redis.ts';
import { vcfleetCommand } from '../../shared/text/advice.ts';

/** Runs listed when `--limit` is not given. */
const DEFAULT_LIMIT = 20;

function parseLimit(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_LIMIT;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new ConfigError(`--limit must be a whole number of runs, at least 1, not "${raw}"`);
  return n;
}

/** `2030-01-01T12:00:00.123Z` as `2030-01-01 12:00:00Z` (UTC, to the second). */
function when(iso: string): string {
  return iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

/** One line per run under a header: id, benchmark, policy, rows/total, accuracy (correct/scored, masked), created. */
export function formatRuns(runs: readonly RecentRun[]): string {
  const lines = runs.map((r) => [
    r.run_id, r.benchmark, r.policy_model, `${r.rows}/${r.total}`,
    `${percent(r.accuracy)} (${r.correct}/${r.scored})${r.masked ? `, ${r.masked} masked` : ''}`,
    when(r.created_at),
  ]);
  return table([['run', 'benchmark', 'policy', 'rows', 'accuracy', 'created'], ...lines]);
}

export function registerRuns(program: Command, cli: Cli): void {
  program
    .command('runs')
    .description('the recent runs of the prefix, newest first: benchmark, policy model, rows done, accuracy so far, created')
    .option('--limit <n>', `runs to list (default ${DEFAULT_LIMIT})`)
    .option('--json', 'print JSON (an array, newest first) instead of a table')
    .option('--config <path>', 'config YAML')
    .action(async (opts: { config?: string; limit?: string; json?: boolean }) => {
      const limit = parseLimit(opts.limit);
      const { config, logger } = cli.context(opts);
      const { redis, url, where, close } = await connectToRuns(config, logger);
      try {
        const prefix = config.queues.prefix;
        const { runs, totalRuns } = await recentRuns(new RunStore(redis, prefix), limit);
        if (opts.json) process.stdout.write(`${JSON.stringify(runs, null, 2)}\n`);
        else if (runs.length === 0) process.stdout.write(`no runs under prefix "${prefix}" (queues.prefix, VCFLEET_PREFIX) in ${where}; create one with ${vcfleetCommand('produce')} or ${vcfleetCommand('run')}\n`);
        else {
          const more = totalRuns > runs.length ? `\n(the ${runs.length} newest of ${totalRuns} runs; see more with --limit)` : '';
          // Runs of a private Redis are found again only from this state folder: say where they are.
          const from = url ? `runs in ${where}:\n` : '';
          process.stdout.write(terminalText(`${from}${formatRuns(runs)}${more}\n`));
        }
      } finally {
        await close();
      }
    });
}
