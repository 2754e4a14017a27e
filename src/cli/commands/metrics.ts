/**
 * `vcfleet metrics <jsonl>`: recompute the aggregate metrics of each run in an output file, print
 * them as the summary table of `vcfleet run` (or JSON), and write `<stem>_fleet_metrics.json`
 * when the file is one run's (or `--run-id` picks one).
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
function runMetrics(file: string, runId: string, rows: readonly Row[], numRepeats: number | undefined): MetricsFile {
  const recorded = recordedIdentity(fleetMetricsToRead(file), runId);
  const inRows = rows.reduce((most, r) => Math.max(most, r.repeat + 1), 1);
  if (numRepeats !== undefined && numRepeats < inRows) {
    throw new ConfigError(`--num-repeats ${numRepeats} is fewer than run ${runId} of ${file} has: it holds rows of repeat ${inRows - 1} (repeats count from 0)`);
  }
  const repeats = numRepeats ?? Math.max(inRows, recorded?.num_repeats ?? 1);
  return metricsFile(identityFromRows(runId, rows, recorded), aggregateMetrics(rows, repeats, recordedPricing(fleetMetricsToRead(file), runId)));
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

export function registerMetrics(program: Command): void {
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
    .action((file: string, opts: MetricsFlags) => {
      const numRepeats = parseRepeats(opts.numRepeats);
      const { all, runs } = selectRuns(file, opts.runId);
      const results = [...runs].map(([id, rows]) => runMetrics(file, id, rows, numRepeats));
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
        const published = readPublishedResults();
        process.stdout.write(terminalText(`${results.map((m) => runTable(file, m, written, published)).join('\n\n')}\n`));
      }
    });
}
