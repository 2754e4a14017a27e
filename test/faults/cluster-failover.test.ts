/**
 * A Redis Cluster failover timed the way a user meets it (issue 37): a 6-node Cluster, the roles as
 * separate `vcfleet worker` processes with `redis.cluster=true`, a hash-tagged prefix; a first run
 * completes, then a second run is produced and, while two of its rollouts are in their sandboxes,
 * the primary that holds the run's slot is SIGKILLed. Its replica is promoted; every role must take
 * jobs again by itself: every row of the run once, none masked, within 2 minutes of the promotion.
 * Two topologies: every node listed (`redis.cluster_nodes`), and one seed that is the node killed.
 *
 * It is a race (whether a role's blocking fetch or its marker dies with the old primary), so it is
 * looped: `scripts/loop-cluster-failover.sh 10` (VCFLEET_FAULT_LOOP=10) runs each case ten times.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { startScriptedJudgeServer, type ScriptedJudgeServer } from '../helpers/scripted-judge-server.ts';
import { makeFleetEnv, runCli, startCli, waitFor, type CliProcess } from '../helpers/fleet.ts';
import { startCluster, stopAllRedisHa, type ClusterSet } from '../helpers/redis-ha.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';
import { countLines, expectedRewards, expectOneRowEach, expectRewards, killAll, readJsonl } from './fault-helpers.ts';

const ROWS = 4;
/** Long enough that two rollouts are surely in their sandboxes when the primary dies. */
const SCRIPT = { '*': { answer: '@gold', delay_ms: 6000 } };
const LOOP = Math.max(1, Number(process.env.VCFLEET_FAULT_LOOP ?? 1));
const AFTER_PROMOTION_MS = 120_000;

describe('a Redis Cluster failover while rollouts are in their sandboxes (roles as processes)', () => {
  let judge: ScriptedJudgeServer | undefined;
  let procs: CliProcess[] = [];
  let client: Cluster | undefined;
  afterEach(async () => {
    await killAll(procs);
    procs = [];
    client?.disconnect();
    client = undefined;
    await judge?.close();
    judge = undefined;
    await stopAllRedisHa();
    removeTmpDirs();
  });

  const logs = () => procs.map((p, i) => `--- ${['sandbox', 'judge', 'results'][i]}\n${p.output().slice(-5000)}`).join('\n');

  /** The whole story of the issue on `cluster`, the roles connected through `redisUrl` and `seeds`. */
  async function failoverMidRun(cluster: ClusterSet, tag: string, redisUrl: string, seeds: string[]): Promise<{ stalls: number }> {
    judge = await startScriptedJudgeServer();
    const nodes = seeds.length ? [`++redis.cluster_nodes=[${seeds.join(',')}]`] : [];
    const env = await makeFleetEnv({
      rows: ROWS, judgeUrl: judge.url, script: SCRIPT, redisUrl,
      overrides: ['++redis.cluster=true', ...nodes, `++queues.prefix={${tag}}`, '++queues.rollout_concurrency=2', '++judge.concurrency=1'],
    });
    procs = ['sandbox', 'judge', 'results'].map((role) => startCli(['worker', role, ...env.overrides]));

    // A first run completes, every key in one slot, and `vcfleet status` works.
    expect((await runCli(['produce', '--run-id', 'c1', ...env.overrides])).code).toBe(0);
    await waitFor(`${ROWS} rows of the first run`, () => countLines(env.output) >= ROWS, 120_000, 200).catch((err: Error) => {
      throw new Error(`${err.message}\n${logs()}`);
    });
    const first = await runCli(['status', '--run-id', 'c1', '--json', ...env.overrides]);
    expect(first.code, first.output).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ rows: ROWS, complete: true });

    // A second run (to the same file: the results consumer moves the first run's rows aside); once two
    // of its rollouts are in their sandboxes, the primary of the slot dies.
    const produced = await runCli(['produce', '--run-id', 'c2', ...env.overrides]);
    expect(produced.code, produced.output).toBe(0);
    client = new Cluster(cluster.startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } });
    client.on('error', () => {});
    await waitFor('two rollouts of the second run in their sandboxes', async () => (await client!.llen(`{${tag}}:rollout:active`)) >= 2, 30_000, 100);
    await sleep(1000);
    const owner = await cluster.ownerOf(`{${tag}}:runs`);
    await cluster.kill(owner.primary.port);
    const next = await cluster.waitForTakeover(owner.primary.port);
    expect(owner.replicas.map((r) => r.port)).toContain(next.port);
    const promoted = Date.now();

    const second = () => (existsSync(env.output) ? readFileSync(env.output, 'utf8').split('\n').filter((l) => l.includes('"run_id":"c2"')).length : 0);
    await waitFor(`${ROWS} rows of the second run within 2 minutes of the promotion`, () => second() >= ROWS, AFTER_PROMOTION_MS, 250).catch((err: Error) => {
      throw new Error(`${err.message} (${second()} rows)\n${logs()}`);
    });
    const rows = readJsonl(env.output);
    expectOneRowEach(rows, 'c2', env.fixture);
    expectRewards(rows, expectedRewards(env.fixture, SCRIPT)); // every row scored: none masked
    // A new process needs a live node among those it is given (a role learns the rest; a CLI does not).
    const allNodes = `++redis.cluster_nodes=[${cluster.startupNodes.filter((n) => n.port !== owner.primary.port).map((n) => `${n.host}:${n.port}`).join(',')}]`;
    // Complete: every row, and no job of the run left (a rollout whose lock lapsed in the failover runs
    // again; its second row is a duplicate the results consumer keeps once).
    const status = await waitFor('`vcfleet status` to say the second run is complete', async () => {
      const out = await runCli(['status', '--run-id', 'c2', '--json', ...env.overrides, allNodes]);
      expect(out.code, out.output).toBe(0);
      const s = JSON.parse(out.stdout);
      return s.complete ? s : undefined;
    }, Math.max(10_000, AFTER_PROMOTION_MS - (Date.now() - promoted)), 1000).catch((err: Error) => {
      throw new Error(`${err.message}\n${logs()}`);
    });
    expect(status).toMatchObject({ rows: ROWS, complete: true });
    console.log(`[fault] Cluster failover mid-session: ${ROWS}/${ROWS} rows ${Math.round((Date.now() - promoted) / 1000)} s after the promotion`);

    // The results consumer reconciled once for this loss of Redis, not once per connection back.
    const passes = procs[2].output().split('\n').filter((l) => l.includes('"run_id":"c2"') && l.includes('"reason":"redis back"'));
    expect(passes.length, procs[2].output().slice(-4000)).toBeLessThanOrEqual(1);
    const stallLines = procs.flatMap((p) => p.output().split('\n').filter((l) => /jobs waiting, none taken/.test(l)));
    for (const l of stallLines) console.log(`[fault] watchdog: ${String(JSON.parse(l).msg)}`);
    const stalls = stallLines.length;
    if (stalls > 0) {
      // The recoveries are counted where an operator looks.
      const text = await runCli(['status', '--run-id', 'c2', ...env.overrides, allNodes]);
      // With the blocking client's state and the nodes it knows (BullMQ #4138), as the recovery logged them.
      expect(text.stdout).toMatch(/queue watchdog: workers that sat idle with jobs waiting, recovered: .*\d+ \(last at \S+, \d+ job\(s\) waited \d+ s, blocking client \w+ with \d+ node\(s\)\)/);
    }
    for (const p of procs) p.child.kill('SIGTERM');
    expect(await Promise.all(procs.map((p) => p.exited)), logs()).toEqual([0, 0, 0]);
    return { stalls };
  }

  for (let i = 1; i <= LOOP; i++) {
    const nth = LOOP > 1 ? ` (${i}/${LOOP})` : '';
    it(`every node listed: the run finishes with one row each after the primary of its slot is killed${nth}`, async () => {
      const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
      const tag = `vcft-${randomBytes(3).toString('hex')}`;
      const seeds = cluster.startupNodes.map((n) => `${n.host}:${n.port}`);
      const { stalls } = await failoverMidRun(cluster, tag, `redis://${seeds[0]}`, seeds);
      console.log(`[fault] every node listed: ${stalls} stalled queue(s) recovered by the watchdog`);
    }, 420_000);

    it(`one seed, the node killed: the roles follow the Cluster through the nodes they learned${nth}`, async () => {
      const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
      const tag = `vcft-${randomBytes(3).toString('hex')}`;
      const owner = await cluster.ownerOf(`{${tag}}:runs`);
      const { stalls } = await failoverMidRun(cluster, tag, `redis://${owner.primary.host}:${owner.primary.port}`, []);
      console.log(`[fault] single seed: ${stalls} stalled queue(s) recovered by the watchdog`);
      // The role said at start that one seed cannot follow a failover of that node, and how to list more.
      expect(procs[1].output()).toMatch(/only one Redis Cluster node.*redis\.cluster_nodes/);
    }, 420_000);
  }
});
