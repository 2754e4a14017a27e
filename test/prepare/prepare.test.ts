import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigSchema, type Config } from '../../src/shared/config/load.ts';
import { DataError } from '../../src/shared/errors.ts';
import { PreparedTaskSchema, type PreparedTask } from '../../src/shared/records/task.ts';
import { formatPrepareSummary, prepareBenchmark, type PrepareOptions } from '../../src/prepare/prepare.ts';
import { formatQuestion } from '../../src/prepare/prompts.ts';
import { writeFixtureParquet, type FixtureOptions } from '../helpers/fixture-parquet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { captureLogger, textSink } from '../helpers/log-capture.ts';

afterEach(removeTmpDirs);

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

function setup(fixture: FixtureOptions = {}, config: Record<string, unknown> = {}) {
  const root = createTmpDir();
  const dataDir = path.join(root, 'data');
  const fx = writeFixtureParquet(path.join(root, 'bv.parquet'), fixture);
  const cfg: Config = ConfigSchema.parse({ data_dir: dataDir, ...config });
  return { root, dataDir, fx, cfg };
}

function run(cfg: Config, parquetPath: string, extra: Partial<PrepareOptions> = {}) {
  const log = captureLogger();
  const stderr = textSink();
  const promise = prepareBenchmark(cfg, { benchmark: 'babyvision_opencode', parquetPath, logger: log.logger, stderr, ...extra });
  return { promise, log, stderr };
}

function readTasks(dir: string): PreparedTask[] {
  return readFileSync(path.join(dir, 'tasks.jsonl'), 'utf8').trim().split('\n').map((l) => PreparedTaskSchema.parse(JSON.parse(l)));
}

describe('prepareBenchmark on a good parquet', () => {
  it('writes every task with its gold, prompt and content-addressed image, manifest last', async () => {
    const { dataDir, fx, cfg } = setup({}, { limit: 3 });
    const { promise, log, stderr } = run(cfg, fx.path);
    const result = await promise;
    expect(result.reused).toBe(false);
    expect(result.dir).toBe(path.join(dataDir, 'babyvision_opencode'));
    const tasks = readTasks(result.dir);
    expect(tasks).toHaveLength(10); // limit is the producer's business, not prepare's
    for (const [i, task] of tasks.entries()) {
      const want = fx.expected[i];
      expect(task).toMatchObject({
        task_id: want.task_id, gold: want.gold, type: want.type, subtype: want.subtype, ans_type: want.ans_type,
        options: want.options, image_mime: want.image_mime, image_sha256: want.image_sha256, benchmark: 'babyvision_opencode',
      });
      expect(task.question).toBe(formatQuestion(want.question, want.options));
      expect(task.prompt).toContain(task.question);
      const bytes = readFileSync(path.join(result.dir, task.image_file));
      expect(task.image_file).toBe(`images/${sha256(bytes)}.${want.image_mime === 'image/png' ? 'png' : 'jpg'}`);
    }
    expect(new Set(tasks.map((t) => t.ans_type))).toEqual(new Set(['choice', 'blank']));
    expect(new Set(tasks.map((t) => t.image_mime))).toEqual(new Set(['image/png', 'image/jpeg']));
    expect(tasks.filter((t) => t.ans_type === 'choice').every((t) => /^[A-D]$/.test(t.gold))).toBe(true);
    expect(readdirSync(path.join(result.dir, 'images'))).toHaveLength(fx.numImages);
    expect(fx.numImages).toBeLessThan(10);
    expect(result.manifest).toMatchObject({ version: 1, benchmark: 'babyvision_opencode', source_sha256: fx.sha256, num_tasks: 10, num_images: fx.numImages });
    expect(readdirSync(dataDir)).toEqual(['babyvision_opencode']);
    const progress = log.lines.filter((l) => l.msg === 'prepare progress').map((l) => l.rows_done);
    expect(progress).toEqual([4, 8, 10]);
    expect(stderr.text()).toContain(`++babyvision.sha256=${fx.sha256}`);
    expect(log.lines.some((l) => l.level === 40 && l.sha256 === fx.sha256)).toBe(true);
    expect(formatPrepareSummary(result)).toMatch(/babyvision_opencode: 10 tasks, \d+ images in .*newly prepared/);
  });

  it('reads a GZIP-compressed parquet as well as a snappy one (every codec parquet allows)', async () => {
    const { fx, cfg } = setup({ codec: 'GZIP' });
    const result = await run(cfg, fx.path).promise;
    const tasks = readTasks(result.dir);
    expect(tasks.map((t) => [t.task_id, t.gold])).toEqual(fx.expected.map((t) => [t.task_id, t.gold]));
    for (const task of tasks) expect(sha256(readFileSync(path.join(result.dir, task.image_file)))).toBe(task.image_sha256);
  });

  it('question_only variant: the prompt is the question with its options', async () => {
    const { fx, cfg } = setup();
    const { promise } = run(cfg, fx.path, { benchmark: 'babyvision_opencode_question_only' });
    const result = await promise;
    const tasks = readTasks(result.dir);
    expect(path.basename(result.dir)).toBe('babyvision_opencode_question_only');
    for (const task of tasks) expect(task.prompt).toBe(task.question);
    expect(tasks[0].question).toMatch(/\n\(A\) red square\n\(B\) blue circle/);
  });

  it('logs progress by row group for 388 rows', async () => {
    const { fx, cfg } = setup({ rows: 388, rowGroupSize: 100 });
    const { promise, log } = run(cfg, fx.path);
    expect((await promise).manifest.num_tasks).toBe(388);
    const progress = log.lines.filter((l) => l.msg === 'prepare progress').map((l) => [l.rows_done, l.total_rows]);
    expect(progress).toEqual([[100, 388], [200, 388], [300, 388], [388, 388]]);
  });
});

describe('reuse of an existing preparation', () => {
  it('reuses with reuse_existing_data_preparation: true and leaves files untouched', async () => {
    const { fx, cfg } = setup();
    const first = await run(cfg, fx.path).promise;
    const manifestFile = path.join(first.dir, 'manifest.json');
    const before = [statSync(manifestFile).mtimeMs, statSync(path.join(first.dir, 'tasks.jsonl')).mtimeMs];
    const again = run(cfg, fx.path);
    const second = await again.promise;
    expect(second.reused).toBe(true);
    expect(second.manifest).toEqual(first.manifest);
    expect([statSync(manifestFile).mtimeMs, statSync(path.join(first.dir, 'tasks.jsonl')).mtimeMs]).toEqual(before);
    expect(again.log.lines.some((l) => String(l.msg).includes('reusing existing data preparation'))).toBe(true);
    expect(formatPrepareSummary(second)).toContain('reused existing preparation');
  });

  it('rebuilds with reuse_existing_data_preparation: false, replacing the old folder', async () => {
    const { dataDir, fx, cfg } = setup();
    const first = await run(cfg, fx.path).promise;
    const second = await run({ ...cfg, reuse_existing_data_preparation: false }, fx.path).promise;
    expect(second.reused).toBe(false);
    expect(second.manifest.prepared_at >= first.manifest.prepared_at).toBe(true);
    expect(readdirSync(dataDir)).toEqual(['babyvision_opencode']);
    expect(readTasks(second.dir)).toHaveLength(10);
  });

  it('rebuilds when the source changed, even with reuse on', async () => {
    const { root, fx, cfg } = setup();
    await run(cfg, fx.path).promise;
    const other = writeFixtureParquet(path.join(root, 'other.parquet'), { rows: 6 });
    const second = await run(cfg, other.path).promise;
    expect(second.reused).toBe(false);
    expect(second.manifest).toMatchObject({ source_sha256: other.sha256, num_tasks: 6 });
  });
});

describe('SHA-256 pin', () => {
  it('accepts a matching pin without a warning', async () => {
    const { fx, cfg } = setup();
    const { promise, stderr, log } = run({ ...cfg, babyvision: { ...cfg.babyvision, sha256: fx.sha256 } }, fx.path);
    await promise;
    expect(stderr.text()).toBe('');
    expect(log.lines.some((l) => Number(l.level) >= 40)).toBe(false);
  });

  it('refuses a mismatch, printing both hashes and the fix, leaving the old folder alone', async () => {
    const { dataDir, fx, cfg } = setup();
    const first = await run(cfg, fx.path).promise;
    const pinned = 'f'.repeat(64);
    const err = await run({ ...cfg, reuse_existing_data_preparation: false, babyvision: { ...cfg.babyvision, sha256: pinned } }, fx.path)
      .promise.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataError);
    const message = (err as Error).message;
    expect(message).toContain(`computed: ${fx.sha256}`);
    expect(message).toContain(`pinned (babyvision.sha256): ${pinned}`);
    expect(message).toContain(`++babyvision.sha256=${fx.sha256}`);
    expect(readdirSync(dataDir)).toEqual(['babyvision_opencode']);
    expect(JSON.parse(readFileSync(path.join(first.dir, 'manifest.json'), 'utf8')).prepared_at).toBe(first.manifest.prepared_at);
  });
});

/** Spoils the fixture at `file`; returns the path to prepare from (default `file`). */
type Breaker = (p: { root: string; file: string }) => string | void;

const BAD_INPUTS: Array<[string, Breaker, RegExp]> = [
  ['a missing file', ({ root }) => path.join(root, 'nowhere.parquet'), /parquet file .*nowhere\.parquet does not exist/],
  ['a folder instead of a file', ({ root }) => root, /parquet file .* is not a regular file/],
  ['a file that is not parquet', ({ file }) => writeFileSync(file, 'taskId,question\n1,hello\n'), /bv\.parquet is not a parquet file/],
  ['a truncated parquet', ({ file }) => truncateSync(file, statSync(file).size - 100), /bv\.parquet is truncated or damaged/],
  ['missing columns', ({ file }) => void writeFixtureParquet(file, { omitColumns: ['image', 'blankAns'] }), /bv\.parquet lacks columns image, blankAns/],
  ['a row without image bytes', ({ file }) => mutate(file, (r) => (r[5].image = { bytes: null, path: 'x.png' })), /task bv-006 .*no image bytes/],
  ['a row without an image', ({ file }) => mutate(file, (r) => (r[2].image = null)), /task bv-003 .*no image bytes/],
  ['an image that is not PNG or JPEG', ({ file }) => mutate(file, (r) => (r[9].image = { bytes: new TextEncoder().encode('GIF89a......'), path: 'a.png' })), /task bv-010 .*neither PNG nor JPEG/],
  ['a choice without choiceAns', ({ file }) => mutate(file, (r) => (r[0].choiceAns = null)), /task bv-001 .*choiceAns null is not a valid/],
  ['a choiceAns out of range', ({ file }) => mutate(file, (r) => (r[3].choiceAns = 4)), /task bv-004 .*choiceAns 4 is not a valid 0-based index into its 4 options/],
  ['a blank without blankAns', ({ file }) => mutate(file, (r) => (r[4].blankAns = null)), /task bv-005 .*blank answer type but no blankAns/],
  ['a duplicate taskId', ({ file }) => mutate(file, (r) => (r[8].taskId = 'bv-002')), /duplicate taskId bv-002 \(rows 1 and 8\)/],
  ['taskIds that give the same job id', ({ file }) => mutate(file, (r) => ((r[2].taskId = 'a/b'), (r[6].taskId = 'a:b'))), /taskIds a\/b and a:b give the same job id \(a_b\) \(rows 2 and 6\)/],
];

function mutate(file: string, change: (rows: ReturnType<typeof writeFixtureParquet>['rows']) => void): void {
  writeFixtureParquet(file, { mutate: (rows) => (change(rows), rows) });
}

describe('bad input', () => {
  it.each(BAD_INPUTS)('%s: DataError naming the problem, previous folder untouched, nothing half-written', async (_name, breakIt, pattern) => {
    const { root, dataDir, fx, cfg } = setup();
    const first = await run(cfg, fx.path).promise;
    const before = readFileSync(path.join(first.dir, 'tasks.jsonl'), 'utf8');
    const file = path.join(root, 'bv.parquet');
    const target = breakIt({ root, file }) ?? file;
    const err = await run({ ...cfg, reuse_existing_data_preparation: false }, target).promise.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataError);
    expect((err as Error).message).toMatch(pattern);
    expect(readdirSync(dataDir)).toEqual(['babyvision_opencode']);
    expect(readFileSync(path.join(first.dir, 'tasks.jsonl'), 'utf8')).toBe(before);
  });

  it('leaves no folder at all when there was none before', async () => {
    const { root, dataDir, cfg } = setup({ mutate: (rows) => ((rows[7].image = null), rows) });
    const err = await run(cfg, path.join(root, 'bv.parquet')).promise.catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/task bv-008/);
    expect(readdirSync(dataDir)).toEqual([]);
  });
});
