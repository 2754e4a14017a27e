/**
 * `vcfleet prepare`: turn the BabyVision parquet into `<data_dir>/<benchmark>/` (tasks.jsonl,
 * content-addressed images, manifest.json last), reusing a complete earlier preparation of the
 * same source when allowed.
 */
import path from 'node:path';
import type { BenchmarkName, Config } from '../shared/config/load.ts';
import { DataError } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import type { Manifest } from '../shared/records/task.ts';
import { buildPreparedTask } from './build-task.ts';
import { downloadFile, downloadPath, huggingFaceUrl, type DownloadOptions } from './download.ts';
import { sha256File } from './hash.ts';
import { openParquetSource, type ParquetSource } from './parquet-source.ts';
import { PROMPT_VERSION } from './prompts.ts';
import { taskIdForJobs } from '../shared/queue/registry.ts';
import { checkColumns, readBabyVisionRows } from './read-babyvision.ts';
import { checkSourcePin, type TextSink } from './source-pin.ts';
import { readManifest } from './load-prepared.ts';
import { createPreparedWriter, type PreparedWriter } from './write-prepared.ts';

export interface PrepareOptions {
  benchmark: BenchmarkName;
  /** Source parquet; overrides `config.babyvision_parquet`. Neither set: download the pinned revision. */
  parquetPath?: string | null;
  logger: Logger;
  /** Where the no-pin warning line goes; default process.stderr. */
  stderr?: TextSink;
  /** Download tuning (attempts, retry delay, progress stream). */
  download?: Partial<Omit<DownloadOptions, 'logger'>>;
}

export interface PrepareResult {
  /** The prepared benchmark folder, `<data_dir>/<benchmark>`. */
  dir: string;
  manifest: Manifest;
  /** True when an existing preparation of the same source was kept as is. */
  reused: boolean;
}

/** The manifest as written: the shared schema plus the prompt version it was built with. */
type WrittenManifest = Manifest & { prompt_version: number };

async function resolveSource(config: Config, options: PrepareOptions): Promise<{ file: string; downloaded: boolean }> {
  const local = options.parquetPath ?? config.babyvision_parquet;
  if (local) return { file: path.resolve(local), downloaded: false };
  const url = huggingFaceUrl(config.babyvision);
  const dest = path.resolve(downloadPath(config.data_dir, config.babyvision));
  options.logger.info({ url, dest }, 'no local parquet given (--parquet, BABYVISION_PARQUET); downloading the pinned revision');
  await downloadFile(url, dest, { logger: options.logger, ...options.download });
  return { file: dest, downloaded: true };
}

async function reusable(dir: string, benchmark: string, sha: string): Promise<Manifest | null> {
  const manifest = await readManifest(dir);
  if (!manifest) return null;
  const same = manifest.benchmark === benchmark && manifest.source_sha256 === sha && manifest.prompt_version === PROMPT_VERSION;
  if (!same) return null;
  const { prompt_version: _ignored, ...rest } = manifest;
  return rest;
}

/** Read every row group into the writer; returns the number of tasks. Throws DataError on bad rows. */
async function fill(writer: PreparedWriter, source: ParquetSource, benchmark: BenchmarkName, logger: Logger): Promise<number> {
  const file = source.path;
  // Task ids that differ but give the same job id (`a/b`, `a:b`, `a_b`) would share rollouts.
  const seen = new Map<string, { taskId: string; row: number }>();
  let count = 0;
  for await (const batch of readBabyVisionRows(source)) {
    const tasks = batch.rows.map((row) => {
      const key = taskIdForJobs(row.taskId);
      const earlier = seen.get(key);
      if (earlier !== undefined) {
        const what = earlier.taskId === row.taskId ? `duplicate taskId ${row.taskId}` : `taskIds ${earlier.taskId} and ${row.taskId} give the same job id (${key})`;
        throw new DataError(`${file}: ${what} (rows ${earlier.row} and ${row.rowIndex}); fix the parquet so that every taskId is distinct in letters, digits, "_", "-" and "."`);
      }
      seen.set(key, { taskId: row.taskId, row: row.rowIndex });
      return { task: buildPreparedTask(row, benchmark), bytes: row.image };
    });
    for (const { task, bytes } of tasks) await writer.addImage(task, bytes);
    await writer.addTasks(tasks.map((t) => t.task));
    count += tasks.length;
    logger.info({ benchmark, rows_done: batch.rowsDone, total_rows: batch.totalRows }, 'prepare progress');
  }
  if (count === 0) throw new DataError(`parquet file ${file} has no rows`);
  return count;
}

async function buildFrom(source: ParquetSource, dataDir: string, benchmark: BenchmarkName, sha: string, logger: Logger): Promise<Manifest> {
  const file = source.path;
  const writer = await createPreparedWriter(dataDir, benchmark);
  try {
    const numTasks = await fill(writer, source, benchmark, logger);
    const manifest: WrittenManifest = {
      version: 1,
      benchmark,
      source_sha256: sha,
      source_path: file,
      num_tasks: numTasks,
      num_images: writer.imageCount(),
      prepared_at: new Date().toISOString(),
      prompt_version: PROMPT_VERSION,
    };
    await writer.commit(manifest);
    const { prompt_version: _ignored, ...rest } = manifest;
    return rest;
  } finally {
    await writer.abort();
  }
}

/**
 * Prepare one benchmark variant. `limit` is not applied here (the producer applies it): every row
 * is written. Throws DataError for bad input, leaving any earlier preparation untouched.
 */
export async function prepareBenchmark(config: Config, options: PrepareOptions): Promise<PrepareResult> {
  const { benchmark, logger } = options;
  const dataDir = path.resolve(config.data_dir);
  const dir = path.join(dataDir, benchmark);
  const { file, downloaded } = await resolveSource(config, options);
  // A file that is not BabyVision parquet fails here, on its footer alone, before anything is written.
  const source = await openParquetSource(file);
  try {
    checkColumns(source);
    const sha = await sha256File(file);
    checkSourcePin({ file, actual: sha, pinned: config.babyvision.sha256, downloaded, logger, stderr: options.stderr ?? process.stderr });
    if (config.reuse_existing_data_preparation) {
      const manifest = await reusable(dir, benchmark, sha);
      if (manifest) {
        logger.info({ benchmark, dir, source_sha256: sha }, 'reusing existing data preparation (same source SHA-256)');
        return { dir, manifest, reused: true };
      }
    }
    logger.info({ benchmark, source: file, dir }, 'preparing benchmark');
    const manifest = await buildFrom(source, dataDir, benchmark, sha, logger);
    return { dir, manifest, reused: false };
  } finally {
    await source.close();
  }
}

/** The one-line summary `vcfleet prepare` prints on stdout. */
export function formatPrepareSummary(result: PrepareResult): string {
  const m = result.manifest;
  const how = result.reused ? 'reused existing preparation' : 'newly prepared';
  return `${m.benchmark}: ${m.num_tasks} tasks, ${m.num_images} images in ${result.dir} (source sha256 ${m.source_sha256}; ${how})`;
}
