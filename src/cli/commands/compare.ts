/**
 * `vcfleet compare A B`: run B against run A, paired by task (src/shared/output/compare-runs.ts).
 * Each side is an output JSONL of one run, or a run id read from Redis. Prints both accuracies, the
 * difference with its 95% interval, the flips, McNemar's exact p (the sign test with repeats), per
 * type and subtype; `--json` prints the comparison as data.
 */
import { terminalText } from '../../shared/text/terminal-text.ts';
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { ConfigError, DataError } from '../../shared/errors.ts';
import type { Row } from '../../shared/records/rows.ts';
import { RunStore } from '../../shared/stores/run-store.ts';
import { readRunsStrict } from '../../shared/output/row-file.ts';
import { compareRuns, type CompareSide } from '../../shared/output/compare-runs.ts';
import type { Cli } from '../context.ts';
import { connectToRun } from '../run-redis.ts';
import { comparisonText } from '../compare-table.ts';

interface CompareFlags {
  json?: boolean;
  config?: string;
  seed?: string;
}

const RUN_ID = /^[A-Za-z0-9_.-]+$/;

/** A side from an output JSONL: its one run's rows (a bad line is refused naming the file and line). */
function fromFile(file: string): CompareSide {
  const runs = readRunsStrict(file);
  const ids = [...runs.keys()];
  if (ids.length === 0) throw new DataError(`${file} holds no rows: pass the output JSONL of a run (output_jsonl_fpath)`);
  if (ids.length > 1) throw new DataError(`${file} holds ${ids.length} runs (${ids.join(', ')}): compare takes one run a side; pass one of them by run id`);
  return { name: file, rows: runs.get(ids[0])! };
}

/** A side from Redis: every row of run `runId`. */
async function fromRedis(cli: Cli, opts: CompareFlags, runId: string): Promise<CompareSide> {
  const { config, logger } = cli.context(opts);
  const conn = await connectToRun(config, logger, runId);
  try {
    const store = new RunStore(conn.redis, config.queues.prefix);
    await store.requireRun(runId);
    const rows: Row[] = [];
    for await (const row of store.scanRows(runId)) rows.push(row);
    return { name: `run ${runId}`, rows };
  } finally {
    await conn.close();
  }
}

async function sideOf(cli: Cli, opts: CompareFlags, arg: string): Promise<CompareSide> {
  if (existsSync(arg)) return fromFile(arg);
  if (arg.endsWith('.jsonl') || !RUN_ID.test(arg)) throw new DataError(`${arg} does not exist: pass an output JSONL of a run, or a run id (see vcfleet runs)`);
  return fromRedis(cli, opts, arg);
}

function parseSeed(raw: string | undefined): number {
  if (raw === undefined) return 1;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new ConfigError(`--seed must be a whole number of at least 0, not "${raw}"`);
  return n;
}

export function registerCompare(program: Command, cli: Cli): void {
  program
    .command('compare')
    .description('run B against run A, paired by task: both accuracies, B - A with its 95% CI, the flips, McNemar\'s exact p, per type and subtype')
    .argument('<a>', 'run A: an output JSONL of one run, or a run id in Redis')
    .argument('<b>', 'run B: the same')
    .option('--json', 'print the comparison as JSON')
    .option('--seed <n>', 'seed of the resampled interval (used only when the exact one is too wide to compute; default 1)')
    .option('--config <path>', 'config YAML (for a run id: where its Redis is)')
    .addHelpText('after', '\nExit codes: 0 compared, 2 bad input (a file that is not a row file, runs of different benchmarks).')
    .action(async (a: string, b: string, opts: CompareFlags) => {
      const seed = parseSeed(opts.seed);
      const sideA = await sideOf(cli, opts, a);
      process.stderr.write(terminalText(`A: ${sideA.rows.length} rows from ${sideA.name}\n`));
      const sideB = await sideOf(cli, opts, b);
      process.stderr.write(terminalText(`B: ${sideB.rows.length} rows from ${sideB.name}\n`));
      const comparison = compareRuns(sideA, sideB, seed);
      process.stdout.write(opts.json ? `${JSON.stringify(comparison, null, 2)}\n` : `${terminalText(comparisonText(comparison))}\n`);
    });
}
