import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { writeFixtureParquet } from '../../helpers/fixture-parquet.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';

afterEach(removeTmpDirs);

const repo = fileURLToPath(new URL('../../..', import.meta.url));

function vcfleet(args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env, VCFLEET_LOG_JSON: '1' };
  for (const key of ['BABYVISION_PARQUET', 'VCFLEET_CONFIG', 'VCFLEET_DATA_DIR']) delete env[key];
  const res = spawnSync(process.execPath, ['bin/vcfleet.js', ...args], { cwd: repo, env, encoding: 'utf8', timeout: 60_000 });
  return { code: res.status, stdout: res.stdout, stderr: res.stderr };
}

describe('vcfleet prepare (real CLI)', () => {
  it('prepares a parquet, then reuses it, printing a summary line', async () => {
    const root = createTmpDir();
    const dataDir = path.join(root, 'data');
    const fx = writeFixtureParquet(path.join(root, 'bv.parquet'));
    const args = ['prepare', '--benchmark', 'babyvision_opencode', '--parquet', fx.path, `++data_dir=${dataDir}`];
    const first = vcfleet(args);
    expect(first.stderr).toContain(`++babyvision.sha256=${fx.sha256}`);
    expect(first.code).toBe(0);
    expect(first.stdout.trim()).toBe(
      `babyvision_opencode: 10 tasks, ${fx.numImages} images in ${path.join(dataDir, 'babyvision_opencode')} ` +
        `(source sha256 ${fx.sha256}; newly prepared)`,
    );
    expect(existsSync(path.join(dataDir, 'babyvision_opencode', 'manifest.json'))).toBe(true);
    const second = vcfleet([...args, `++babyvision.sha256=${fx.sha256}`]);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain('reused existing preparation');
    expect(second.stderr).not.toContain('WARNING');
  });

  it('exits 2 with a message naming a file that is not parquet, leaving nothing behind', async () => {
    const root = createTmpDir();
    const dataDir = path.join(root, 'data');
    const bad = path.join(root, 'notes.parquet');
    writeFileSync(bad, 'just some text, not parquet');
    const res = vcfleet(['prepare', '--benchmark', 'babyvision_opencode_question_only', '--parquet', bad, `++data_dir=${dataDir}`]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain(`vcfleet: ${bad} is not a parquet file`);
    expect(res.stdout).toBe('');
    expect(existsSync(dataDir)).toBe(false);
  });

  it('exits 2 naming the key for an unknown benchmark', () => {
    const root = createTmpDir();
    const res = vcfleet(['prepare', '--benchmark', 'babyvision_nope', '--parquet', path.join(root, 'x'), `++data_dir=${root}`]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/config key "benchmark"/);
  });

  it('exits 2 at once when offline, saying to pass --parquet or set BABYVISION_PARQUET', async () => {
    const root = createTmpDir();
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const { port } = closed.address() as AddressInfo;
    await new Promise((r) => closed.close(r));
    const res = vcfleet(['prepare', '--benchmark', 'babyvision_opencode', `++data_dir=${root}`, `++babyvision.endpoint=http://127.0.0.1:${port}`]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(new RegExp(`vcfleet: cannot reach http://127\\.0\\.0\\.1:${port}/datasets/UnipatAI/BabyVision/resolve/\\w+/data/train-00000-of-00001\\.parquet: connection refused`));
    expect(res.stderr).toContain('pass --parquet PATH or set BABYVISION_PARQUET');
    expect(res.stderr).not.toContain('download interrupted');
  });
});
