/**
 * The benchmark a run needs: prepared from the configured parquet (reused when the source is the
 * same), or the existing preparation when no source is configured, or else downloaded and prepared.
 */
import type { Config } from '../shared/config/load.ts';
import type { Logger } from '../shared/logger.ts';
import { loadPreparedBenchmark, readManifest, type PreparedBenchmark } from './load-prepared.ts';
import { prepareBenchmark } from './prepare.ts';
import path from 'node:path';

export async function loadOrPrepare(config: Config, logger: Logger): Promise<PreparedBenchmark> {
  const prepared = await readManifest(path.resolve(config.data_dir, config.benchmark));
  if (config.babyvision_parquet || !prepared || !config.reuse_existing_data_preparation) {
    await prepareBenchmark(config, { benchmark: config.benchmark, logger });
  }
  return loadPreparedBenchmark(config.data_dir, config.benchmark);
}
