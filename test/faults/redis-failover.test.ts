/**
 * The Redis primary is SIGKILLed in the middle of a run, with rollouts in flight and judge jobs
 * waiting: under Redis Sentinel (a primary, a replica, three sentinels) the sentinels promote the
 * replica; under Redis Cluster (three primaries with a replica each) the replica of the primary that
 * holds the run's slot takes over. Either way the roles (separate `vcfleet worker` processes) find the
 * new primary by themselves, say so in a few lines rather than one per retry, reconcile the run with
 * what survived, finish it with exactly one row per task, and still stop on SIGTERM. Every Redis here
 * is the test's own, on free loopback ports (test/helpers/redis-ha.ts).
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { startScriptedJudgeServer, type ScriptedJudgeServer } from '../helpers/scripted-judge-server.ts';
import { FAKE_JUDGE_KEY, makeFleetEnv, runCli, startCli, waitFor, type CliProcess, type FleetEnv } from '../helpers/fleet.ts';
import { startCluster, startSentinelSet, stopAllRedisHa } from '../helpers/redis-ha.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';
import { countLines, expectedRewards, expectOneRowEach, expectRewards, killAll, readJsonl } from './fault-helpers.ts';

const SCRIPT = { '*': { answer: '@gold', delay_ms: 700 }, 'bv-003': { answer: 'X', delay_ms: 700 } };
const ROWS = 8;

describe('the Redis primary is killed mid-run', () => {
  let judge: ScriptedJudgeServer | undefined;
  let procs: CliProcess[] = [];
  /** Passwords of the test's Redis, which no output may show. */
  let secrets: Record<string, string> = {};
  afterEach(async () => {
    secrets = {};
    await killAll(procs);
    procs = [];
    await judge?.close();
    judge = undefined;
    await stopAllRedisHa();
    removeTmpDirs();
  });

  /** The environment of every vcfleet process of the test (a sentinel password). */
  let cliEnv: Record<string, string> = {};
  /** Produce the run, start the three roles as processes, wait for the first rows. */
  async function startFleet(runId: string, redisUrl: string, extra: string[] = [], processEnv: Record<string, string> = {}): Promise<FleetEnv> {
    cliEnv = processEnv;
    judge = await startScriptedJudgeServer();
    const env = await makeFleetEnv({ rows: ROWS, judgeUrl: judge.url, script: SCRIPT, redisUrl, overrides: ['++queues.rollout_concurrency=2', '++judge.concurrency=1', ...extra] });
    const produced = await runCli(['produce', '--run-id', runId, ...env.overrides], cliEnv);
    expect(produced.code, produced.output).toBe(0);
    procs = ['sandbox', 'judge', 'results'].map((role) => startCli(['worker', role, ...env.overrides], cliEnv));
    await waitFor('2 rows before the kill', () => countLines(env.output) >= 2, 90_000, 100);
    return env;
  }

  /** Every task one row, the fault-free rewards, the status complete and reconciled, a clean SIGTERM. */
  async function finish(runId: string, env: FleetEnv): Promise<void> {
    await waitFor(`${ROWS} rows`, () => countLines(env.output) >= ROWS, Number(process.env.VCFLEET_FAILOVER_WAIT_MS ?? 120_000), 250).catch((err: Error) => {
      throw new Error(`${err.message} (${countLines(env.output)} rows)\n${procs.map((p) => p.output().slice(-4000)).join('\n---\n')}`);
    });
    const rows = readJsonl(env.output);
    expectOneRowEach(rows, runId, env.fixture);
    expectRewards(rows, expectedRewards(env.fixture, SCRIPT));
    // The results consumer reconciles once Redis has stayed back a few seconds (one reconcile per
    // reconnection), which may be after the last row.
    let status = await runCli(['status', '--run-id', runId, '--json', ...env.overrides], cliEnv);
    for (let i = 0; i < 30 && status.code === 0 && JSON.parse(status.stdout).reconciled === null; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      status = await runCli(['status', '--run-id', runId, '--json', ...env.overrides], cliEnv);
    }
    expect(status.code, status.output).toBe(0);
    const s = JSON.parse(status.stdout);
    expect(s).toMatchObject({ rows: ROWS, complete: true });
    // The results consumer checked the run against what survived once Redis was back.
    expect(s.reconciled, status.stdout).toMatchObject({ run_id: runId, reason: 'redis back' });
    const text = await runCli(['status', '--run-id', runId, ...env.overrides], cliEnv);
    expect(text.stdout).toMatch(/reconciled after a lost Redis at \S+: \d+ row\(s\) put back from the output file, \d+ lost rollout\(s\) produced again/);
    for (const p of procs) p.child.kill('SIGTERM');
    expect(await Promise.all(procs.map((p) => p.exited)), procs.map((p) => p.output().slice(-2000)).join('\n---\n')).toEqual([0, 0, 0]);
    for (const p of procs) {
      for (const secret of [FAKE_JUDGE_KEY, ...Object.values(secrets)]) expect(p.output()).not.toContain(secret);
      // One line per change of Redis's state, not one per retry (the issue saw ~830 stack traces).
      const lost = p.output().split('\n').filter((l) => /lost the connection to Redis/.test(l)).length;
      expect(lost, p.output().slice(-3000)).toBeLessThanOrEqual(4);
      expect(p.output()).not.toMatch(/ECONNREFUSED[\s\S]*ECONNREFUSED[\s\S]*ECONNREFUSED[\s\S]*ECONNREFUSED[\s\S]*ECONNREFUSED/);
    }
  }

  it('Sentinel (passwords on the data nodes and the sentinels): the replica is promoted and the run completes with one row per task', async () => {
    secrets = { data: 'data-pw-HA-0001', sentinel: 'sentinel-pw-HA-0002' };
    const set = await startSentinelSet({ replicas: 1, sentinels: 3, password: secrets.data, sentinelPassword: secrets.sentinel });
    const env = await startFleet('sf', set.url, [], { REDIS_SENTINEL_PASSWORD: secrets.sentinel });
    const before = countLines(env.output);
    await set.kill(set.primary.port);
    const promoted = await set.waitForFailover();
    expect(promoted.port).toBe(set.replicas[0].port);
    await finish('sf', env);
    console.log(`[fault] Sentinel: primary SIGKILLed after ${before}/${ROWS} rows, replica promoted: ${ROWS}/${ROWS} rows, one each`);
  });

  it('Cluster: the primary holding the run\'s slot fails over and the run completes with one row per task', async () => {
    const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    const seeds = cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(',');
    const tag = `vcft-${randomBytes(3).toString('hex')}`;
    const env = await startFleet('cf', `redis+cluster://${seeds}`, [`++queues.prefix={${tag}}`]);
    const owner = await cluster.ownerOf(`{${tag}}:runs`);
    const before = countLines(env.output);
    await cluster.kill(owner.primary.port);
    const next = await cluster.waitForTakeover(owner.primary.port);
    expect(owner.replicas.map((r) => r.port)).toContain(next.port);
    await finish('cf', env);
    console.log(`[fault] Cluster: the primary of slot ${owner.slot} SIGKILLed after ${before}/${ROWS} rows, its replica took over: ${ROWS}/${ROWS} rows, one each`);
  });

  it('Cluster misconfigured: a plain URL to a node, or a prefix without a hash tag, stops at once naming the fix', async () => {
    const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    const node = cluster.nodes[0];
    judge = await startScriptedJudgeServer();
    const env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url, redisUrl: node.url });
    const plain = await runCli(['worker', 'judge', ...env.overrides, '++preflight.enabled=false']);
    expect(plain.code, plain.output).not.toBe(0);
    expect(plain.output).toMatch(/is a Redis Cluster node: set redis\.cluster=true .*hash tag, e\.g\. VCFLEET_PREFIX=\{vcftest-[0-9a-f]+\}/);
    const untagged = await runCli(['produce', '--run-id', 'cu', ...env.overrides, '++redis.cluster=true']);
    expect(untagged.code, untagged.output).not.toBe(0);
    expect(untagged.output).toMatch(/queues\.prefix "vcftest-[0-9a-f]+" has no hash tag.*set queues\.prefix to \{vcftest-[0-9a-f]+\}/);
  });
});
