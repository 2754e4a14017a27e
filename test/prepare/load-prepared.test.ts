import { appendFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/shared/config.ts';
import { DataError } from '../../src/shared/errors.ts';
import { loadPreparedBenchmark } from '../../src/prepare/load-prepared.ts';
import { prepareBenchmark } from '../../src/prepare/prepare.ts';
import { writeFixtureParquet } from '../helpers/fixture-parquet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { captureLogger, textSink } from './log-capture.ts';

afterEach(removeTmpDirs);

async function prepared() {
  const root = createTmpDir();
  const dataDir = path.join(root, 'data');
  const fx = writeFixtureParquet(path.join(root, 'bv.parquet'));
  const config = ConfigSchema.parse({ data_dir: dataDir });
  const result = await prepareBenchmark(config, {
    benchmark: 'babyvision_opencode', parquetPath: fx.path, logger: captureLogger().logger, stderr: textSink(),
  });
  return { dataDir, fx, result };
}

async function loadError(dataDir: string, benchmark = 'babyvision_opencode'): Promise<string> {
  const err = await loadPreparedBenchmark(dataDir, benchmark).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(DataError);
  return (err as Error).message;
}

describe('loadPreparedBenchmark', () => {
  it('loads the manifest and every task, with image paths that exist', async () => {
    const { dataDir, fx, result } = await prepared();
    const bench = await loadPreparedBenchmark(dataDir, 'babyvision_opencode');
    expect(bench.dir).toBe(result.dir);
    expect(bench.manifest).toEqual(result.manifest);
    expect(bench.tasks.map((t) => t.task_id)).toEqual(fx.expected.map((e) => e.task_id));
    expect(bench.tasks.map((t) => t.gold)).toEqual(fx.expected.map((e) => e.gold));
    for (const task of bench.tasks) expect(existsSync(bench.imagePath(task))).toBe(true);
  });

  it('says to run prepare when the benchmark was never prepared', async () => {
    const { dataDir } = await prepared();
    expect(await loadError(dataDir, 'babyvision_opencode_question_only')).toContain(
      'run `vcfleet prepare --benchmark babyvision_opencode_question_only` first',
    );
  });

  it('treats a folder without manifest.json as not prepared', async () => {
    const { dataDir, result } = await prepared();
    rmSync(path.join(result.dir, 'manifest.json'));
    expect(await loadError(dataDir)).toMatch(/not prepared.*run `vcfleet prepare --benchmark babyvision_opencode` first/);
  });

  it('names the line of an invalid task', async () => {
    const { dataDir, result } = await prepared();
    const file = path.join(result.dir, 'tasks.jsonl');
    const lines = readFileSync(file, 'utf8').split('\n');
    lines[1] = JSON.stringify({ ...JSON.parse(lines[1]), image_sha256: 'nope' });
    writeFileSync(file, lines.join('\n'));
    expect(await loadError(dataDir)).toMatch(/tasks\.jsonl line 2 is not a valid task: image_sha256/);
    lines[1] = '{not json';
    writeFileSync(file, lines.join('\n'));
    expect(await loadError(dataDir)).toMatch(/tasks\.jsonl line 2 is not valid JSON/);
  });

  it('notices a task count that disagrees with the manifest', async () => {
    const { dataDir, result } = await prepared();
    const file = path.join(result.dir, 'tasks.jsonl');
    appendFileSync(file, readFileSync(file, 'utf8').split('\n')[0] + '\n');
    expect(await loadError(dataDir)).toMatch(/holds 11 tasks but its manifest says 10/);
  });
});
