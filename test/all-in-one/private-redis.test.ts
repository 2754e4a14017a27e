/**
 * Two runs side by side in one folder, without a REDIS_URL: they share the folder's private Redis
 * (each counted as its user), the second started while the first runs. The first ends first and
 * leaves the server running under the second, which completes; the last to leave stops it.
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { makeFleetEnv, startCli, waitFor, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

describe('the private Redis of one folder, shared by runs side by side', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  beforeAll(async () => {
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url, overrides: ['++queues.rollout_concurrency=1'] });
  });
  afterAll(async () => {
    removeTmpDirs();
  });

  it('the first run to end leaves the Redis to the second, which completes; the last one stops it', async () => {
    const overrides = env.overrides.filter((o) => !o.startsWith('++redis_url='));
    const script = (name: string, delay: number) => {
      const file = path.join(env.dir, name);
      writeFileSync(file, JSON.stringify({ '*': { answer: '@gold', delay_ms: delay } }));
      return file;
    };
    const [fast, slow] = [script('fast.json', 2000), script('slow.json', 5000)];
    const first = startCli(['run', '--run-id', 'side-1', ...overrides, `++agent.script_path=${fast}`, `++output_jsonl_fpath=${path.join(env.dir, 'side-1.jsonl')}`]);
    await waitFor('the first run to start its private Redis', async () => first.output().includes('started a private redis-server'), 60_000, 200);
    const second = startCli(['run', '--run-id', 'side-2', ...overrides, `++agent.script_path=${slow}`, `++output_jsonl_fpath=${path.join(env.dir, 'side-2.jsonl')}`]);
    await waitFor('the second run to use the same Redis', async () => second.output().includes('using the private redis-server another vcfleet command runs'), 60_000, 200);
    expect(first.child.exitCode, first.output()).toBeNull(); // the first still runs then
    expect(await first.exited, first.output()).toBe(0);
    expect(second.child.exitCode, second.output()).toBeNull(); // the second still runs once the first ended
    expect(await second.exited, second.output()).toBe(0);
    expect(second.output()).not.toContain('lost the connection to Redis');
    expect(second.output()).toContain('complete: all 3 rollouts scored');
    // The last to leave stopped it: no server file left in the folder.
    expect(existsSync(path.join(env.dir, 'state', 'redis', 'server.json'))).toBe(false);
  }, 240_000);
});
