/**
 * `vcfleet run` whose Redis goes away for good (its own redis-server, killed mid-run): the run ends
 * once Redis did not answer for `redis.outage_limit_s`, exit 4 with the command to resume; and the
 * first SIGTERM ends a run whose Redis is gone, without a second signal (what it could not hand back
 * comes back when its locks expire).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startScriptedJudgeServer, type ScriptedJudgeServer } from '../helpers/scripted-judge-server.ts';
import { CLI, makeFleetEnv, startCli, waitFor, type CliProcess } from '../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { countLines, killAll, startOwnRedis, type OwnRedis } from './fault-helpers.ts';

describe('vcfleet run when its Redis is gone', () => {
  let judge: ScriptedJudgeServer | undefined;
  let redis: OwnRedis | undefined;
  let procs: CliProcess[] = [];
  afterEach(async () => {
    await killAll(procs);
    procs = [];
    await redis?.stop();
    await judge?.close();
    removeTmpDirs();
  });

  async function runUntilRows(runId: string, extra: string[]): Promise<{ run: CliProcess }> {
    judge = await startScriptedJudgeServer();
    redis = await startOwnRedis(createTmpDir('vcfleet-redis-'));
    const env = await makeFleetEnv({ rows: 6, judgeUrl: judge.url, script: { '*': { answer: '@gold', delay_ms: 1500 } }, redisUrl: redis.url, overrides: ['++queues.rollout_concurrency=1', ...extra] });
    const run = startCli(['run', '--run-id', runId, ...env.overrides]);
    procs.push(run);
    await waitFor('a row before the fault', () => countLines(env.output) >= 1, 90_000, 100);
    return { run };
  }

  it('gone longer than redis.outage_limit_s: exit 4, naming the limit and how to resume', async () => {
    const { run } = await runUntilRows('gone-1', ['++redis.outage_limit_s=4']);
    await redis!.stop();
    expect(await run.exited, run.output()).toBe(4);
    expect(run.stdout()).toMatch(/ended without its Redis: Redis did not answer for \d+ s \(redis\.outage_limit_s\)/);
    expect(run.stdout()).toContain(`Once Redis is back, resume with \`${CLI} run --run-id gone-1`);
  }, 240_000);

  it('the first SIGTERM ends a run whose Redis is gone', async () => {
    const { run } = await runUntilRows('gone-2', []);
    await redis!.stop();
    await waitFor('the run to notice', async () => run.output().includes('Redis'), 30_000, 200);
    run.child.kill('SIGTERM');
    expect(await run.exited, run.output()).toBe(4);
    expect(run.stdout()).toMatch(/stopped at \d+\/6 rows; resume with/);
  }, 240_000);
});
