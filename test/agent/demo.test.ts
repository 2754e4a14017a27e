/**
 * `vcfleet demo`, the first command a newcomer types, in a terminal of its own: preflight passes
 * against its own scripted servers, four puzzles go through the real OpenCode in local sandboxes,
 * and it ends with the summary, exit 0 and the next steps; the rows and transcripts are on disk.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { readRowsStrict } from '../../src/shared/output/row-file.ts';
import { REDIS_URL, startCliInTerminal } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';

describe('vcfleet demo', () => {
  const prefix = `vcftest-demo-${randomBytes(4).toString('hex')}`;
  afterAll(async () => {
    const redis = new Redis(REDIS_URL);
    await deletePrefix(redis, prefix);
    redis.disconnect();
    removeTmpDirs();
  });

  it('runs four puzzles through the real OpenCode and says what to do next', async () => {
    const dir = createTmpDir('vcfleet-demo-');
    const demo = startCliInTerminal(['demo', `++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`, `++state_dir=${path.join(dir, 'state')}`,
      `++output_root=${dir}`, '++preflight.require_redis_persistence=false'], { TMPDIR: dir });
    expect(await demo.exited, demo.output()).toBe(0);
    const out = demo.output();
    const runId = /demo run (demo-[\w-]+): 4 synthetic puzzles/.exec(out)?.[1];
    expect(runId, out).toBeDefined();
    expect(out).toMatch(/mean\/reward\s+75\.0%/);
    expect(out).toContain('complete: all 4 rollouts scored');
    expect(out).toContain('Next: the same run against a real policy endpoint and judge');
    const file = path.join(dir, 'results', 'demo', `${runId}.jsonl`);
    const rows = readRowsStrict(file);
    expect(rows.map((r) => r.stop_reason)).toEqual(['answered', 'answered', 'answered', 'answered']);
    for (const row of rows) expect(existsSync(path.resolve(path.dirname(file), row.transcript!)), row.transcript!).toBe(true);
  });
});
