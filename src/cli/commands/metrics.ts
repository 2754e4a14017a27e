/** `vcfleet metrics <jsonl>`: recompute a run's aggregate metrics from its output file. */
import { writeFileSync, renameSync } from 'node:fs';
import type { Command } from 'commander';
import { readRowsStrict } from '../../workers/results/row-file.ts';
import { aggregateMetrics, metricsPathFor } from '../../workers/results/metrics.ts';

export function registerMetrics(program: Command): void {
  program
    .command('metrics')
    .description('recompute the aggregate metrics from an output JSONL (writes <stem>_aggregate_metrics.json beside it)')
    .argument('<jsonl>', 'the output JSONL of a run')
    .option('--num-repeats <n>', 'repeats of the run (default: inferred from the rows)')
    .option('--stdout', 'print the metrics only, do not write the file')
    .action((file: string, opts: { numRepeats?: string; stdout?: boolean }) => {
      const rows = readRowsStrict(file);
      const repeats = opts.numRepeats ? Number(opts.numRepeats) : Math.max(1, ...rows.map((r) => r.repeat + 1));
      const metrics = { run_id: rows[0]?.run_id ?? null, ...aggregateMetrics(rows, repeats) };
      const text = `${JSON.stringify(metrics, null, 2)}\n`;
      if (!opts.stdout) {
        const out = metricsPathFor(file);
        writeFileSync(`${out}.tmp`, text);
        renameSync(`${out}.tmp`, out);
        process.stderr.write(`wrote ${out}\n`);
      }
      process.stdout.write(text);
    });
}
