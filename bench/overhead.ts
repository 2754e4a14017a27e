/**
 * Benchmark 1, pipeline overhead: the whole fleet (producer -> sandbox-worker with a no-op scripted
 * agent -> judge-worker with a no-op judge -> results consumer writing the JSONL) against bare
 * BullMQ on the same Redis in the same process: one queue with a no-op worker, and three chained
 * queues with no-op workers (the floor three hops impose).
 *
 * Both sides run in this one Node process (as `vcfleet run` does) with the same concurrency: the
 * first two hops take `concurrency` jobs at once, the third RESULTS_CONCURRENCY (what the results
 * consumer holds; it writes one row at a time). Throughput: rollouts from the first enqueue to the last row written (fleet) or the last
 * hop completed (bare). Latency is measured twice: under load (enqueue of the rollout's 500-job
 * chunk -> its row / last hop), and unloaded (one rollout in flight at a time: add -> row / last hop).
 */
import { performance } from 'node:perf_hooks';
import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { produceRun } from '../src/producer/produce.ts';
import { openQueue, rolloutId } from '../src/shared/queue/registry.ts';
import { createRedis } from '../src/shared/redis/connect.ts';
import { startJudgeWorker } from '../src/workers/judge/worker.ts';
import { startResultsWorker } from '../src/workers/results/worker.ts';
import { createScriptedAgent } from '../src/agent/scripted-agent.ts';
import { startSandboxWorker } from '../src/workers/sandbox/worker.ts';
import { benchConfig, benchPrefix, deferred, deletePrefix, discardLogger, noopJudge, readBenchImage, syntheticTasks } from './lib/fleet.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, fmtInt, median, quantile } from './lib/stats.ts';

export interface OverheadOptions {
  redisUrl: string;
  dir: string;
  /** Rollouts of the throughput phase (rounded up to a multiple of 100 tasks). Default 10000. */
  rollouts: number;
  /** Rollouts of the unloaded-latency phase, one at a time. Default 300. */
  latencySamples: number;
  /** Jobs at once in the first two hops (sandbox and judge workers; bare hops 1 and 2). Default 8. */
  concurrency: number;
  /** Rounds of each side, alternating order; medians are reported. Default 3. */
  rounds: number;
  log?: (line: string) => void;
}

export interface SideResult {
  name: string;
  count: number;
  seconds: number;
  perSecond: number;
  /** Milliseconds per rollout, under load. */
  loaded: number[];
  /** Milliseconds per rollout, one rollout in flight. */
  unloaded: number[];
  /** Rows (last hop) per second while the earlier hops were still working, and after they had finished. */
  lastHopRate: { contended: number; alone: number };
  /** Redis commands per rollout in the throughput phase (commands run inside Lua scripts included), by command. */
  commands: Map<string, number>;
}

/** `INFO commandstats` as command -> calls. */
async function commandCalls(redis: Redis): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const m of (await redis.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out.set(m[1], Number(m[2]));
  return out;
}

function perRollout(before: Map<string, number>, after: Map<string, number>, count: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const [cmd, calls] of after) {
    const d = (calls - (before.get(cmd) ?? 0)) / count;
    if (d > 0) out.set(cmd, d);
  }
  return out;
}

export function totalCommands(commands: Map<string, number>): number {
  return [...commands.values()].reduce((a, b) => a + b, 0);
}

/** The biggest per-rollout command counts, e.g. `evalsha 9.0, hget 4.0, ...`. */
export function topCommands(commands: Map<string, number>, n = 8): string {
  return [...commands].sort((a, b) => b[1] - a[1]).slice(0, n).map(([c, v]) => `${c} ${fmt(v, 1)}`).join(', ');
}

const TASKS = 100;
const CHUNK = 500;
/**
 * Jobs the results consumer holds at once (hard-wired in src/workers/results/worker.ts; its writes
 * still run one at a time). The bare chain's last hop gets the same.
 */
export const RESULTS_CONCURRENCY = 4;

/** The whole fleet, in-process. */
export async function runFleetSide(opts: OverheadOptions, rollouts: number, samples: number): Promise<SideResult> {
  const prefix = benchPrefix('fleet');
  const repeats = Math.ceil(rollouts / TASKS);
  const total = TASKS * repeats;
  const config = benchConfig({
    redisUrl: opts.redisUrl,
    dir: opts.dir,
    overrides: [
      `++num_repeats=${repeats}`,
      `++queues.rollout_concurrency=${opts.concurrency}`,
      `++judge.concurrency=${opts.concurrency}`,
      `++queues.rollout_global_concurrency=${Math.max(32, opts.concurrency)}`,
    ],
  }, prefix);
  const logger = discardLogger('info');
  const client = createRedis(opts.redisUrl, 'client');
  const connection = createRedis(opts.redisUrl, 'worker');
  const committed = new Map<string, number>();
  const waiters = new Map<string, () => void>();
  const allDone = deferred();
  const results = startResultsWorker({
    config, connection, logger,
    onCommit: (row) => {
      committed.set(row.rollout_id, performance.now());
      waiters.get(row.rollout_id)?.();
      if (committed.size === total) allDone.resolve();
    },
  });
  try {
    await results.ready;
    const judge = await startJudgeWorker({ config, connection, logger, judge: noopJudge });
    const sandbox = await startSandboxWorker({ config, connection, logger, agent: createScriptedAgent({ '*': { answer: '@gold', delay_ms: 0 } }) });
    let lastJudged = 0;
    judge.worker.on('completed', () => (lastJudged = performance.now()));
    try {
      const tasks = syntheticTasks(TASKS);
      const chunkDone: number[] = [];
      const before = await commandCalls(client);
      const t0 = performance.now();
      const produced = await produceRun({ config, redis: client, logger, tasks, readImage: readBenchImage, onProgress: () => chunkDone.push(performance.now()) });
      await allDone.promise;
      const split = lastJudged;
      const seconds = (Math.max(...committed.values()) - t0) / 1000;
      const commands = perRollout(before, await commandCalls(client), total);
      const loaded: number[] = [];
      for (let repeat = 0, i = 0; repeat < repeats; repeat++) {
        for (const task of tasks) loaded.push(committed.get(rolloutId(produced.runId, task.task_id, repeat))! - chunkDone[Math.floor(i++ / CHUNK)]);
      }
      // Unloaded: the producer's exact job (id, attempts, backoff), added one at a time.
      const queue = openQueue('rollout', client, prefix);
      const unloaded: number[] = [];
      for (let j = 0; j < samples; j++) {
        const task = tasks[j % TASKS];
        const repeat = repeats + j;
        const id = rolloutId(produced.runId, task.task_id, repeat);
        const done = deferred();
        waiters.set(id, done.resolve);
        const t = performance.now();
        await queue.add('rollout', { v: 1, run_id: produced.runId, task_id: task.task_id, repeat, rollout_id: id }, {
          jobId: id, attempts: config.queues.rollout_attempts, backoff: { type: 'exponential', delay: config.queues.rollout_backoff_ms },
        });
        await done.promise;
        unloaded.push(committed.get(id)! - t);
      }
      await queue.close();
      const rate = lastHopRate(t0, split, [...committed.values()].slice(0, total));
      return { name: 'fleet', count: total, seconds, perSecond: total / seconds, loaded, unloaded, lastHopRate: rate, commands };
    } finally {
      await sandbox.close(1000);
      await judge.close(1000);
    }
  } finally {
    await results.close(1000);
    await deletePrefix(client, prefix);
    client.disconnect();
    connection.disconnect();
  }
}

/** The last hop's rate before and after `splitAt` (when the hop before it completed its last job). */
function lastHopRate(t0: number, splitAt: number, ends: Iterable<number>): { contended: number; alone: number } {
  const all = [...ends];
  const end = Math.max(...all);
  const before = all.filter((t) => t <= splitAt).length;
  return { contended: before / ((splitAt - t0) / 1000), alone: (all.length - before) / Math.max(1e-3, (end - splitAt) / 1000) };
}

/** Bare BullMQ: `hops` chained queues with no-op workers (concurrency C, C, RESULTS_CONCURRENCY), the fleet's job options. */
export async function runBareSide(opts: OverheadOptions, hops: 1 | 3, rollouts: number, samples: number): Promise<SideResult> {
  const prefix = benchPrefix(`bare${hops}`);
  const total = TASKS * Math.ceil(rollouts / TASKS);
  const client = new Redis(opts.redisUrl, { maxRetriesPerRequest: 2 });
  const connection = new Redis(opts.redisUrl, { maxRetriesPerRequest: null });
  const names = hops === 1 ? ['hop1'] : ['hop1', 'hop2', 'hop3'];
  const concurrency = hops === 1 ? [opts.concurrency] : [opts.concurrency, opts.concurrency, RESULTS_CONCURRENCY];
  const defaultJobOptions = { removeOnComplete: { count: 1000 }, removeOnFail: false };
  // Each hop forwards on the worker's connection, as the fleet's stages do.
  const forward = names.map((n) => new Queue(n, { connection, prefix, defaultJobOptions }));
  const finished = new Map<number, number>();
  const waiters = new Map<number, () => void>();
  const allDone = deferred();
  const workers = names.map(
    (n, k) =>
      new Worker(n, async (job: Job) => {
        if (k < names.length - 1) await forward[k + 1].add(names[k + 1], job.data);
      }, { connection, prefix, concurrency: concurrency[k], lockDuration: 30_000, stalledInterval: 15_000, maxStalledCount: 3 }),
  );
  let lastBeforeLast = 0;
  if (workers.length > 1) workers[workers.length - 2].on('completed', () => (lastBeforeLast = performance.now()));
  workers[workers.length - 1].on('completed', (job: Job) => {
    const i = (job.data as { i: number }).i;
    finished.set(i, performance.now());
    waiters.get(i)?.();
    if (finished.size === total) allDone.resolve();
  });
  const head = new Queue(names[0], { connection: client, prefix, defaultJobOptions });
  const data = (i: number) => ({ v: 1, run_id: 'bare-run', task_id: `bv-${i % TASKS}`, repeat: Math.floor(i / TASKS), rollout_id: `bare-run-bv-${i}`, i });
  try {
    const chunkDone: number[] = [];
    const before = await commandCalls(client);
    const t0 = performance.now();
    for (let i = 0; i < total; i += CHUNK) {
      const n = Math.min(CHUNK, total - i);
      await head.addBulk(Array.from({ length: n }, (_, k) => ({ name: names[0], data: data(i + k) })));
      chunkDone.push(performance.now());
    }
    await allDone.promise;
    const split = lastBeforeLast;
    const seconds = (Math.max(...finished.values()) - t0) / 1000;
    const commands = perRollout(before, await commandCalls(client), total);
    const rate = workers.length > 1 ? lastHopRate(t0, split, [...finished.values()]) : { contended: Number.NaN, alone: Number.NaN };
    const loaded = Array.from({ length: total }, (_, i) => finished.get(i)! - chunkDone[Math.floor(i / CHUNK)]);
    const unloaded: number[] = [];
    for (let j = 0; j < samples; j++) {
      const i = total + j;
      const done = deferred();
      waiters.set(i, done.resolve);
      const t = performance.now();
      await head.add(names[0], data(i));
      await done.promise;
      unloaded.push(finished.get(i)! - t);
    }
    return { name: hops === 1 ? 'bare BullMQ, 1 queue' : 'bare BullMQ, 3 chained queues', count: total, seconds, perSecond: total / seconds, loaded, unloaded, lastHopRate: rate, commands };
  } finally {
    await Promise.allSettled(workers.map((w) => w.close()));
    await Promise.allSettled([head.close(), ...forward.map((q) => q.close())]);
    await deletePrefix(client, prefix);
    client.disconnect();
    connection.disconnect();
  }
}

export async function benchOverhead(opts: OverheadOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  // Warm up JIT and Redis on both paths first. Then `rounds` rounds, each side once per round, the
  // order alternating, so that drift (other load on the machine) hits both sides alike; a round's
  // ratio compares runs made seconds apart, and the median over rounds is reported.
  const warm = Math.min(1000, opts.rollouts);
  await runBareSide(opts, 3, warm, 10);
  await runFleetSide(opts, warm, 10);
  const per = Math.ceil(opts.latencySamples / opts.rounds);
  const fleets: SideResult[] = [];
  const bare3s: SideResult[] = [];
  const bare1s: SideResult[] = [];
  for (let round = 0; round < opts.rounds; round++) {
    const pair = [() => runBareSide(opts, 3, opts.rollouts, per).then((r) => bare3s.push(r)), () => runFleetSide(opts, opts.rollouts, per).then((r) => fleets.push(r))];
    for (const run of round % 2 === 0 ? pair : pair.reverse()) await run();
    bare1s.push(await runBareSide(opts, 1, opts.rollouts, per));
    log(`  round ${round + 1}: fleet ${fmtInt(fleets[round].perSecond)}/s, bare 3 queues ${fmtInt(bare3s[round].perSecond)}/s, bare 1 queue ${fmtInt(bare1s[round].perSecond)}/s`);
  }
  const ratio3 = median(fleets.map((f, k) => f.perSecond / bare3s[k].perSecond));
  const ratio1 = median(fleets.map((f, k) => f.perSecond / bare1s[k].perSecond));
  const chain = median(bare3s.map((b, k) => b.perSecond / bare1s[k].perSecond));
  const [fleet, bare3, bare1] = [fleets, bare3s, bare1s].map(pool);
  const setting = `concurrency ${opts.concurrency} / ${opts.concurrency} / ${RESULTS_CONCURRENCY} (hop 1 / 2 / 3) on both sides, all in one process`;
  const side = (s: Pooled) =>
    `median of rounds ${fmtInt(s.perSecond)}/s; latency one at a time p50 ${fmt(s.unloaded.p50)} ms, p99 ${fmt(s.unloaded.p99)} ms; ` +
    `under load (enqueue of its 500-job chunk -> done) p50 ${fmtInt(s.loaded.p50)} ms, p99 ${fmtInt(s.loaded.p99)} ms`;
  return [
    { bench: '1 overhead', metric: 'fleet throughput / bare 3-queue chain', value: fmt(ratio3), target: '>= 0.80', ok: ratio3 >= 0.8, note: `median of ${opts.rounds} paired rounds of ${fmtInt(fleet.count)} rollouts per side (rounds: ${fleets.map((f, k) => fmt(f.perSecond / bare3s[k].perSecond)).join(', ')}); ${setting}` },
    { bench: '1 overhead', metric: 'fleet throughput / bare 1 queue', value: fmt(ratio1), note: `the single queue's worker takes ${opts.concurrency} jobs at once` },
    { bench: '1 overhead', metric: 'bare 3-queue chain / bare 1 queue', value: fmt(chain), note: 'what three hops cost in BullMQ alone' },
    {
      bench: '1 overhead', metric: 'added latency per rollout, p50 / p99',
      value: `${fmt(fleet.unloaded.p50 - bare3.unloaded.p50)} / ${fmt(fleet.unloaded.p99 - bare3.unloaded.p99)} ms`,
      note: `fleet (enqueue -> row written) minus bare chain (enqueue -> last hop completed), ${fleet.unloaded.count} rollouts one at a time`,
    },
    {
      bench: '1 overhead', metric: 'last hop rate while hops 1-2 work / alone, fleet',
      value: `${fmtInt(fleet.lastHop.contended)} / ${fmtInt(fleet.lastHop.alone)} rows/s`,
      note: `bare chain: ${fmtInt(bare3.lastHop.contended)} / ${fmtInt(bare3.lastHop.alone)} jobs/s. The last hop (the results consumer, one write at a time) sets the pace, and runs slower while it shares the event loop with hops 1-2`,
    },
    {
      bench: '1 overhead', metric: 'Redis commands per rollout, fleet / bare 3-queue chain',
      value: `${fmt(totalCommands(fleets[0].commands), 1)} / ${fmt(totalCommands(bare3s[0].commands), 1)}`,
      note: `incl. those inside BullMQ's Lua scripts. Fleet: ${topCommands(fleets[0].commands)}. Bare: ${topCommands(bare3s[0].commands)}`,
    },
    { bench: '1 overhead', metric: 'fleet', value: `${fmtInt(fleet.perSecond)} rollouts/s`, note: side(fleet) },
    { bench: '1 overhead', metric: 'bare 3 chained queues', value: `${fmtInt(bare3.perSecond)} jobs/s`, note: side(bare3) },
    { bench: '1 overhead', metric: 'bare 1 queue', value: `${fmtInt(bare1.perSecond)} jobs/s`, note: side(bare1) },
  ];
}

interface Pooled {
  count: number;
  perSecond: number;
  loaded: { p50: number; p99: number };
  unloaded: { p50: number; p99: number; count: number };
  lastHop: { contended: number; alone: number };
}

/** Medians of rounds for rates; latency percentiles over every sample of every round. */
function pool(results: SideResult[]): Pooled {
  const loaded = results.flatMap((r) => r.loaded);
  const unloaded = results.flatMap((r) => r.unloaded);
  return {
    count: results[0].count,
    perSecond: median(results.map((r) => r.perSecond)),
    loaded: { p50: quantile(loaded, 0.5), p99: quantile(loaded, 0.99) },
    unloaded: { p50: quantile(unloaded, 0.5), p99: quantile(unloaded, 0.99), count: unloaded.length },
    lastHop: { contended: median(results.map((r) => r.lastHopRate.contended)), alone: median(results.map((r) => r.lastHopRate.alone)) },
  };
}
