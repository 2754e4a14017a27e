/**
 * Redis goes away under a running fleet: restarted (its AOF brings the jobs back) after 10 s of
 * refused connections, or frozen with SIGSTOP for 10 s (connections open, nothing answers). The
 * workers wait it out (`maxRetriesPerRequest: null`) and the run completes with one row each.
 * Each test has its own redis-server, so the session's Redis is never touched.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startScriptedJudgeServer, type ScriptedJudgeServer } from '../helpers/scripted-judge-server.ts';
import { FAKE_JUDGE_KEY, makeFleetEnv, runCli, startCli, waitFor, type CliProcess, type FleetEnv } from '../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { countLines, expectedRewards, expectOneRowEach, expectRewards, readJsonl, startOwnRedis, type OwnRedis, killAll } from './fault-helpers.ts';
import { setTimeout as sleep } from 'node:timers/promises';

describe('Redis restarted or unreachable during a run', () => {
  let judge: ScriptedJudgeServer | undefined;
  let redis: OwnRedis | undefined;
  let env: FleetEnv | undefined;
  let procs: CliProcess[] = [];
  afterEach(async () => {
    await killAll(procs);
    procs = [];
    redis?.resume();
    await redis?.stop();
    await judge?.close();
    env = undefined;
    removeTmpDirs();
  });

  async function fleet(runId: string) {
    judge = await startScriptedJudgeServer();
    redis = await startOwnRedis(createTmpDir('vcfleet-redis-'));
    const script = { '*': { answer: '@gold', delay_ms: 800 }, 'bv-003': { answer: 'X', delay_ms: 800 }, 'bv-006': { answer: null } };
    env = await makeFleetEnv({ rows: 8, judgeUrl: judge.url, script, redisUrl: redis.url, overrides: ['++queues.rollout_concurrency=1'] });
    const produced = await runCli(['produce', '--run-id', runId, ...env.overrides]);
    expect(produced.code, produced.output).toBe(0);
    procs = ['sandbox', 'judge', 'results'].map((role) => startCli(['worker', role, ...env!.overrides]));
    await waitFor('2 rows before the fault', () => countLines(env!.output) >= 2, 60_000, 100);
    return { script, env };
  }

  async function finish(runId: string, script: Parameters<typeof expectedRewards>[1], e: FleetEnv) {
    await waitFor('8 rows', () => countLines(e.output) >= 8, 120_000, 250);
    const rows = readJsonl(e.output);
    expectOneRowEach(rows, runId, e.fixture);
    expectRewards(rows, expectedRewards(e.fixture, script));
    const status = await runCli(['status', '--run-id', runId, '--json', ...e.overrides]);
    expect(JSON.parse(status.stdout)).toMatchObject({ rows: 8, complete: true });
    // The workers outlived the outage and still stop cleanly.
    for (const p of procs) p.child.kill('SIGTERM');
    expect(await Promise.all(procs.map((p) => p.exited))).toEqual([0, 0, 0]);
    for (const p of procs) expect(p.output()).not.toContain(FAKE_JUDGE_KEY);
  }

  it('restarted with AOF after 10 s down: the workers reconnect and the run completes', async () => {
    const { script, env: e } = await fleet('rr');
    await redis!.stop();
    const downAt = countLines(e.output);
    await sleep(10_000);
    await redis!.start();
    await finish('rr', script, e);
    console.log(`[fault] Redis down 10 s after ${downAt}/8 rows, restarted from AOF: 8/8 rows`);
  });

  it('frozen (SIGSTOP) for 10 s: the workers wait, stalled jobs are taken again, one row each', async () => {
    const { script, env: e } = await fleet('rs');
    redis!.pause();
    const pausedAt = countLines(e.output);
    await sleep(10_000);
    redis!.resume();
    await finish('rs', script, e);
    console.log(`[fault] Redis frozen 10 s after ${pausedAt}/8 rows: 8/8 rows`);
  });

  it('vcfleet run (one process, every role) waits out a Redis restart and completes', async () => {
    judge = await startScriptedJudgeServer();
    redis = await startOwnRedis(createTmpDir('vcfleet-redis-'));
    const script = { '*': { answer: '@gold', delay_ms: 800 }, 'bv-003': { answer: 'X', delay_ms: 800 } };
    env = await makeFleetEnv({ rows: 8, judgeUrl: judge.url, script, redisUrl: redis.url, overrides: ['++queues.rollout_concurrency=1'] });
    const run = startCli(['run', '--run-id', 'rv', ...env.overrides]);
    procs = [run];
    await waitFor('2 rows before the fault', () => countLines(env!.output) >= 2, 60_000, 100);
    await redis.stop();
    await sleep(10_000);
    await redis.start();
    expect(await run.exited, run.output()).toBe(0);
    expect(run.stdout()).toMatch(/status\s+complete \(8\/8 rollouts\)/);
    const rows = readJsonl(env.output);
    expectOneRowEach(rows, 'rv', env.fixture);
    expectRewards(rows, expectedRewards(env.fixture, script));
    procs = [];
  });
});
