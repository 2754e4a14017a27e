/**
 * `vcfleet demo`, the first command a newcomer types, in a terminal of its own: preflight passes
 * against its own scripted servers, four puzzles go through the real OpenCode in local sandboxes,
 * and it ends with the summary, exit 0 and the next steps; the rows and transcripts are on disk.
 * A demo whose judge cannot be reached ends masked, and the rejudge it advises, typed as written
 * (no REDIS_URL: the demo's private Redis), grades the rows with the demo's own judge.
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { readRowsStrict } from '../../src/shared/output/row-file.ts';
import { CLI, pasteInShell, REDIS_URL, runCli, startCliInTerminal } from '../helpers/fleet.ts';
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

  it('a demo whose judge is unreachable: the preflight says how to start anyway, the demo ends masked; the rejudge it advises, as written, grades the rows', async () => {
    const dir = createTmpDir('vcfleet-demo-');
    const config = path.join(dir, 'vcfleet.yaml');
    writeFileSync(config, `state_dir: ${path.join(dir, 'state')}\noutput_root: ${dir}\njudge:\n  max_retries: 0\nqueues:\n  judge_attempts: 1\n`);
    const env = { TMPDIR: dir, VCFLEET_CONFIG: config };
    const unreachable = '++visual_coding_opencode_judge_base_url=http://127.0.0.1:9/v1';
    // The preflight finds the judge unreachable and says how to start anyway, in a form the demo takes.
    const refused = await runCli(['demo', unreachable], env);
    expect(refused.code, refused.output).toBe(2);
    const skip = /\(to start anyway: (\S+)\)/.exec(refused.output)?.[1];
    expect(skip, refused.output).toBe('++preflight.enabled=false');
    const demo = await runCli(['demo', unreachable, skip!], env);
    expect(demo.code, demo.output).toBe(3);
    const runId = /demo run (demo-[\w-]+): 4 synthetic puzzles/.exec(demo.output)?.[1];
    const line = demo.stdout.split('\n').find((l) => l.startsWith('complete, but 4 of 4 rollouts are masked'));
    expect(line, demo.stdout).toBeDefined();
    const rejudge = /`node bin\/vcfleet\.js (rejudge --run-id [\w-]+)`/.exec(line!)![1];
    expect(rejudge).toBe(`rejudge --run-id ${runId}`);
    const file = path.join(dir, 'results', 'demo', `${runId}.jsonl`);
    expect(readRowsStrict(file).map((r) => r.failure_kind)).toEqual(['judge_failed', 'judge_failed', 'judge_failed', 'judge_failed']);
    // Pasted as printed into a shell, with only the user's own settings (the config file, TMPDIR) set.
    const graded = await pasteInShell(`${CLI} ${rejudge}`, env);
    expect(graded.code, graded.output).toBe(0);
    expect(graded.stdout).toContain(`sent 4 judge_failed row(s) of run ${runId} back to the judge; no worker serves judge, results: doing it in this process`);
    expect(graded.stdout).toContain('complete: all 4 rollouts scored');
    expect(readRowsStrict(file).map((r) => r.reward).sort()).toEqual([0, 1, 1, 1]);
  }, 300_000);
});
