/**
 * `vcfleet metrics <jsonl>`: recompute the aggregate metrics of each run in an output file, print
 * them as the summary table of `vcfleet run` (or JSON), and write `<stem>_fleet_metrics.json`
 * when the file is one run's (or `--run-id` picks one). `++pricing.…` prices a finished run (the
 * prices given replace those the run recorded, side by side); any other `++` setting is refused,
 * naming why: the rows are all this command reads.
 */
import { terminalText } from '../../shared/text/terminal-text.ts';
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import { ConfigError, DataError } from '../../shared/errors.ts';
import type { Row } from '../../shared/records/rows.ts';
import { readRunsStrict } from '../../shared/output/row-file.ts';
import { aggregateMetrics, metricsPathFor } from '../../shared/output/metrics.ts';
import { fleetMetricsToRead } from '../../shared/output/output-files.ts';
import { readPublishedResults, type PublishedRow } from '../../shared/output/published-results.ts';
import { recordedPricing } from '../../shared/output/run-pricing.ts';
import { identityFromRows, metricsFile, recordedIdentity, type MetricsFile } from '../../shared/output/run-identity.ts';
import { identityRows, metricsRows, reportRows, type TableRow } from '../metrics-table.ts';
import { table } from '../runtime.ts';
import type { Cli } from '../context.ts';
import type { Pricing } from '../../shared/output/run-cost.ts';

interface MetricsFlags {
  runId?: string;
  json?: boolean;
  numRepeats?: string;
  stdout?: boolean;
}

/** The runs of the file to report: all of them, or only `runId`. Throws DataError naming the file. */
function selectRuns(file: string, runId: string | undefined): { all: string[]; runs: Map<string, Row[]> } {
  if (!existsSync(file)) throw new DataError(`${file} does not exist: pass the output JSONL of a run (output_jsonl_fpath)`);
  const runs = readRunsStrict(file);
  const all = [...runs.keys()];
  if (all.length === 0) throw new DataError(`${file} holds no rows`);
  if (runId === undefined) return { all, runs };
  const rows = runs.get(runId);
  if (!rows) throw new DataError(`run ${runId} is not in ${file}; it holds ${all.length === 1 ? 'run' : 'runs'} ${all.join(', ')}`);
  return { all, runs: new Map([[runId, rows]]) };
}

/** `--num-repeats`: a positive integer, or undefined when not given. */
function parseRepeats(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new ConfigError(`--num-repeats must be a whole number of at least 1, not "${raw}"`);
  return n;
}

/**
 * One run's metrics file. Repeats: `--num-repeats`, else the most of the rows' repeats and those the
 * results consumer recorded for this run (a run whose last repeat has no row yet still has it).
 */
function runMetrics(file: string, runId: string, rows: readonly Row[], numRepeats: number | undefined, prices: PricesGiven | null): MetricsFile {
  const recorded = recordedIdentity(fleetMetricsToRead(file), runId);
  const inRows = rows.reduce((most, r) => Math.max(most, r.repeat + 1), 1);
  if (numRepeats !== undefined && numRepeats < inRows) {
    throw new ConfigError(`--num-repeats ${numRepeats} is fewer than run ${runId} of ${file} has: it holds rows of repeat ${inRows - 1} (repeats count from 0)`);
  }
  const repeats = numRepeats ?? Math.max(inRows, recorded?.num_repeats ?? 1);
  const pricing = prices ? withPrices(recordedPricing(fleetMetricsToRead(file), runId), prices) : recordedPricing(fleetMetricsToRead(file), runId);
  return metricsFile(identityFromRows(runId, rows, recorded), aggregateMetrics(rows, repeats, pricing));
}

/** The `++pricing.<side>.<price>` settings of this invocation: which were given, and the prices they make. */
interface PricesGiven {
  keys: Array<[keyof Pricing, keyof Pricing['policy']]>;
  pricing: Pricing;
}

/** The prices a run recorded (none: unpriced), with each one given on the command line in its place. */
function withPrices(recorded: Pricing | undefined, given: PricesGiven): Pricing {
  const none = { input_usd_per_mtok: null, output_usd_per_mtok: null };
  const out: Pricing = { policy: { ...(recorded?.policy ?? none) }, judge: { ...(recorded?.judge ?? none) } };
  for (const [side, price] of given.keys) out[side][price] = given.pricing[side][price];
  return out;
}

/** The `++` settings `metrics` takes (`pricing.*`, `report.published_results`); any other is refused, naming why. */
function readSettings(cli: Cli): { prices: PricesGiven | null; publishedResults: string | null } {
  const keys = cli.overrides.map((o) => o.slice(2).split('=')[0]);
  const other = keys.filter((k) => !/^pricing(\.|$)/.test(k) && k !== 'report.published_results' && !/^log_/.test(k));
  if (other.length > 0) {
    throw new ConfigError(
      `vcfleet metrics recomputes a finished run from its rows alone: ${other.map((k) => `++${k}`).join(', ')} would change nothing here. ` +
        'It takes ++pricing.policy.input_usd_per_mtok=… (and the other pricing.* keys) to price the run, and ++report.published_results=FILE; drop the others',
    );
  }
  const { config } = cli.context({});
  const priced = keys.filter((k) => k.startsWith('pricing.'));
  const sides = (k: string): Array<[keyof Pricing, keyof Pricing['policy']]> => {
    const [, side, price] = k.split('.') as [string, keyof Pricing | undefined, keyof Pricing['policy'] | undefined];
    const s = side ? [side] : (['policy', 'judge'] as const);
    return s.flatMap((x) => (price ? [[x, price]] : [[x, 'input_usd_per_mtok'], [x, 'output_usd_per_mtok']])) as Array<[keyof Pricing, keyof Pricing['policy']]>;
  };
  const prices = priced.length > 0 || keys.includes('pricing') ? { keys: keys.filter((k) => /^pricing(\.|$)/.test(k)).flatMap(sides), pricing: config.pricing } : null;
  return { prices, publishedResults: config.report.published_results };
}

function writeAtomically(out: string, text: string): void {
  writeFileSync(`${out}.tmp`, text);
  renameSync(`${out}.tmp`, out);
}

/** The summary table of one run, as `vcfleet run` prints it; `written`: where its metrics file went, or why not. */
function runTable(file: string, m: MetricsFile, written: string, published: readonly PublishedRow[]): string {
  const lines: TableRow[] = [
    ['run', m.run_id],
    ['rollouts', `${m.num_rollouts}${m.num_repeats > 1 ? ` (${m.num_repeats} repeats)` : ''}`],
    ...identityRows(m.run),
    ...metricsRows(m),
    ...reportRows(m, published),
    ['rows', file],
    ['metrics', written],
  ];
  return table(lines);
}

export function registerMetrics(program: Command, cli: Cli): void {
  program
    .command('metrics')
    .description(
      'recompute the aggregate metrics of each run in an output JSONL and print them; writes <stem>_fleet_metrics.json ' +
        'beside it when the file holds one run (or --run-id picks one)',
    )
    .argument('<jsonl>', 'an output JSONL')
    .option('--run-id <id>', 'only this run of the file')
    .option('--json', 'print JSON: an object keyed by run id, or the one run\'s metrics with --run-id')
    .option('--num-repeats <n>', 'repeats of the run (default: the metrics file beside it, else inferred from the rows)')
    .option('--stdout', 'print only, do not write the metrics file')
    .addHelpText('after', '\nPrice a finished run: ++pricing.policy.input_usd_per_mtok=3 ++pricing.policy.output_usd_per_mtok=15 (and pricing.judge.*); the prices given replace those the run recorded.')
    .action((file: string, opts: MetricsFlags) => {
      const numRepeats = parseRepeats(opts.numRepeats);
      const settings = readSettings(cli);
      const { all, runs } = selectRuns(file, opts.runId);
      const results = [...runs].map(([id, rows]) => runMetrics(file, id, rows, numRepeats, settings.prices));
      const out = metricsPathFor(file);
      let written: string;
      if (opts.stdout) written = 'not written (--stdout)';
      else if (opts.runId === undefined && all.length > 1) {
        written = `not written: ${file} holds ${all.length} runs; pass --run-id to write one run's`;
        process.stderr.write(terminalText(`${file} holds ${all.length} runs (${all.join(', ')}): no metrics file written, as ${out} holds one run's metrics; pass --run-id ID to write one run's\n`));
      } else {
        writeAtomically(out, `${JSON.stringify(results[0], null, 2)}\n`);
        written = out;
        process.stderr.write(`wrote ${out} (run ${results[0].run_id})\n`);
      }
      if (opts.json) {
        const body = opts.runId !== undefined ? results[0] : Object.fromEntries(results.map((m) => [m.run_id, m]));
        process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
      } else {
        const published = readPublishedResults(settings.publishedResults);
        process.stdout.write(terminalText(`${results.map((m) => runTable(file, m, written, published)).join('\n\n')}\n`));
      }
    });
}
