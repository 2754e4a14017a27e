/** `vcfleet prepare`: build `<data_dir>/<benchmark>/` from the BabyVision parquet. */
import type { Command } from 'commander';
import { BENCHMARKS } from '../../shared/config/load.ts';
import { formatPrepareSummary, prepareBenchmark } from '../../prepare/prepare.ts';
import type { Cli } from '../context.ts';

interface PrepareFlags {
  config?: string;
  benchmark?: string;
  parquet?: string;
}

export function registerPrepare(program: Command, cli: Cli): void {
  program
    .command('prepare')
    .description(
      'Prepare a BabyVision benchmark: tasks.jsonl, content-addressed images and manifest.json under <data_dir>/<benchmark>/. ' +
        'The source is --parquet, else babyvision_parquet (BABYVISION_PARQUET), else a download of the pinned revision.',
    )
    .option('--config <path>', 'config file (default: configs/visual_coding_opencode.yaml or VCFLEET_CONFIG)')
    .option('--benchmark <name>', `benchmark variant: ${BENCHMARKS.join(' | ')} (default: config key benchmark)`)
    .option('--parquet <path>', 'local BabyVision parquet (sets babyvision_parquet)')
    .action(async (opts: PrepareFlags) => {
      const { config, logger } = cli.context(opts, {
        benchmark: opts.benchmark,
        babyvision_parquet: opts.parquet,
      });
      const result = await prepareBenchmark(config, {
        benchmark: config.benchmark,
        parquetPath: config.babyvision_parquet,
        logger,
      });
      logger.flush();
      process.stdout.write(`${formatPrepareSummary(result)}\n`);
    });
}
