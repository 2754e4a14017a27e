import { appendFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/shared/config/load.ts';
import { DataError } from '../../src/shared/errors.ts';
import { loadPreparedBenchmark } from '../../src/prepare/load-prepared.ts';
import { prepareBenchmark } from '../../src/prepare/prepare.ts';
import { writeFixtureParquet } from '../helpers/fixture-parquet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { captureLogger, textSink } from '../helpers/log-capture.ts';

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

  it('refuses an image path outside the benchmark folder and two tasks that share a job id', async () => {
    const { dataDir, result } = await prepared();
    const file = path.join(result.dir, 'tasks.jsonl');
    const original = readFileSync(file, 'utf8');
    const tasks = original.trim().split('\n').map((l) => JSON.parse(l));
    for (const escape of ['../../../etc/passwd', '/etc/passwd', 'images/../../x.png']) {
      writeFileSync(file, [{ ...tasks[0], image_file: escape }, ...tasks.slice(1)].map((t) => JSON.stringify(t)).join('\n') + '\n');
      expect(await loadError(dataDir)).toMatch(new RegExp(`task ${tasks[0].task_id} names the image .*outside`));
    }
    writeFileSync(file, [{ ...tasks[0], task_id: 'x:1' }, { ...tasks[1], task_id: 'x/1' }, ...tasks.slice(2)].map((t) => JSON.stringify(t)).join('\n') + '\n');
    expect(await loadError(dataDir)).toMatch(/tasks x:1 and x\/1 give the same job id \(x_1\)/);
  });

  it('checks each image against its SHA-256 when read', async () => {
    const { dataDir } = await prepared();
    const bench = await loadPreparedBenchmark(dataDir, 'babyvision_opencode');
    const task = bench.tasks[0];
    expect((await bench.readImage(task)).length).toBeGreaterThan(0);
    writeFileSync(bench.imagePath(task), Buffer.from('not the image it was'));
    const err = await bench.readImage(task).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataError);
    expect((err as Error).message).toMatch(new RegExp(`image of task ${task.task_id} .* has SHA-256 [0-9a-f]{64}, not ${task.image_sha256}`));
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
