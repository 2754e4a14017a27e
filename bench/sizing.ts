/**
 * Benchmark 15, sizing: how big Redis and the results writer must be for thousands of rollouts at
 * once. Simulated sandbox-worker pods (bench/children/sizing-pods.ts: the real sandbox stage worker,
 * its connection, worker record, lock renewal and watchdog, `slots` rollouts each, the agent a timer
 * of seeded lognormal durations) in a few OS processes, each with a real judge worker (no-op judge);
 * the real results consumer in its own process (bench/children/sizing-results.ts); a feeder that keeps
 * a small backlog of rollout jobs waiting (a run created as `vcfleet produce` makes one). Against one
 * redis-server and a 3-primary Redis Cluster (hash-tagged prefix), the rollouts in flight step up
 * (1k -> 10k by default); at each step, after a warm-up, over a window: Redis CPU and commands/s per
 * node (INFO deltas), memory per rollout in flight (used_memory less the baseline before any pod),
 * BullMQ's lock renewals (its `locksRenewed` events), rows written per second against what the
 * rollouts in flight should give (in flight / mean duration) and the lag from row built to row
 * written; the knee is the first step where rows/s falls behind or the lag grows (sizing-stats.ts).
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { enqueueBulk, openQueue, rolloutId, type RolloutJob } from '../src/shared/queue/registry.ts';
import { createRedis, resolveRedisEndpoint } from '../src/shared/redis/connect.ts';
import { runSettingsFrom } from '../src/shared/config/run-settings.ts';
import { RunStore } from '../src/shared/stores/run-store.ts';
import type { PodsMessage } from './children/sizing-pods.ts';
import type { ResultsMessage } from './children/sizing-results.ts';
import { forkTs, type TsChild } from './lib/child.ts';
import { hostBusySeconds } from './lib/cpu.ts';
import { benchConfig, benchPrefix, BENCH_IMAGE, syntheticTasks } from './lib/fleet.ts';
import type { BenchRow } from './lib/report.ts';
import { startSizingRedis, type Topology } from './lib/sizing-redis.ts';
import { cpuOf, findKnee, lagQuantiles, lognormalMedian, nodeRates, sizingTable, topCommands, type SizingStep } from './lib/sizing-stats.ts';
import { fmt, fmtInt } from './lib/stats.ts';

export interface SizingOptions {
  dir: string;
  /** Rollouts in flight at each step. Default 1000, 2000, 5000, 10000. */
  steps: number[];
  topologies: Topology[];
  warmupS: number;
  windowS: number;
  /** Mean simulated rollout duration, seconds (lognormal). Default 60. */
  meanS: number;
  sigma: number;
  /** Rollouts at once per simulated pod (`queues.rollout_concurrency`). Default 8. */
  slots: number;
  /** OS processes the pods are spread over. Default 4. */
  processes: number;
  /** Rollout jobs kept waiting. Default 500. */
  backlog: number;
  /** `maxclients` of every Redis node. Default 20000. */
  maxclients: number;
  seed: number;
  log?: (line: string) => void;
}

const TASKS = 500;

/** `ulimit -n` of this process (its children and redis-servers inherit it). */
function openFilesLimit(): string {
  return /Max open files\s+(\S+)/.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1] ?? 'unknown';
}
/** The run never ends during the benchmark: its total is far above what is produced. */
const REPEATS = 100_000;

/** Send `message` and wait for the child's next message of `kind` (not an older one). */
async function ask<M extends { kind: string }>(child: TsChild<M>, message: object, kind: M['kind']): Promise<M> {
  const seen = child.messages.length;
  child.child.send(message);
  return child.next((m) => m.kind === kind && child.messages.indexOf(m) >= seen);
}

/** One topology's ladder: Redis started, run created, feeder, results and pod processes, then each step. */
async function ladder(topology: Topology, opts: SizingOptions, log: (l: string) => void): Promise<{ steps: SizingStep[]; notes: string[] }> {
  const redis = await startSizingRedis(topology, opts.maxclients);
  const prefix = redis.prefix(benchPrefix('sizing'));
  const config = benchConfig({ redisUrl: redis.url, dir: opts.dir, overrides: [`++num_repeats=${REPEATS}`] }, prefix);
  const client = createRedis(resolveRedisEndpoint(config), 'worker');
  const children: Array<TsChild<PodsMessage>> = [];
  let results: TsChild<ResultsMessage> | null = null;
  let feeding = true;
  let feeder: Promise<void> = Promise.resolve();
  const queue = openQueue('rollout', client, prefix, { policy: config.queues });
  try {
    const maxclients = await redis.maxclients();
    const notes = [`maxclients ${fmtInt(maxclients)} (asked ${fmtInt(opts.maxclients)}; Redis lowers it to what its open-files limit allows, here ${openFilesLimit()})`];
    // The run, as `vcfleet produce` records it; its jobs are fed below, a backlog at a time.
    const tasks = syntheticTasks(TASKS);
    const store = new RunStore(client, prefix);
    const runId = `sizing-${topology}`;
    await store.createRun({
      run_id: runId, benchmark: config.benchmark, created_at: new Date().toISOString(), num_tasks: TASKS, num_repeats: REPEATS, total: TASKS * REPEATS,
      output_jsonl_fpath: config.output_jsonl_fpath ?? `results/${runId}.jsonl`, policy_model: config.policy_model_name, judge_model: config.visual_coding_opencode_judge_model_name,
      settings: runSettingsFrom(config), queue_scope: null, origin: 'produce', settings_changes: [],
    });
    await store.putTasks(runId, tasks);
    await store.putBlob(tasks[0].image_sha256, BENCH_IMAGE);
    await queue.setGlobalConcurrency(1_000_000);
    let produced = 0;
    const feedOnce = async () => {
      const missing = opts.backlog - (await queue.getWaitingCount());
      if (missing <= 0) return;
      const jobs: RolloutJob[] = Array.from({ length: missing }, (_, k) => {
        const n = produced + k;
        const taskId = tasks[n % TASKS].task_id;
        const repeat = Math.floor(n / TASKS);
        return { v: 1, run_id: runId, task_id: taskId, repeat, rollout_id: rolloutId(runId, taskId, repeat) };
      });
      produced += missing;
      await enqueueBulk('rollout', queue, jobs);
      await client.sadd(store.keys.enqueued(runId), ...jobs.map((j) => j.rollout_id));
    };
    await feedOnce();
    feeder = (async () => {
      while (feeding) {
        await feedOnce().catch((err: Error) => log(`  feeder: ${err.message}`));
        await sleep(200);
      }
    })();
    await sleep(1000);
    const baseline = (await redis.counters()).reduce((a, n) => a + n.counters.usedMemory, 0);
    results = forkTs<ResultsMessage>('bench/children/sizing-results.ts', [redis.url, prefix, opts.dir]);
    await results.next((m) => m.kind === 'ready');
    const median = lognormalMedian(opts.meanS, opts.sigma);
    for (let k = 0; k < opts.processes; k++) {
      const judgeConcurrency = Math.max(16, Math.ceil(Math.max(...opts.steps) / opts.meanS / opts.processes));
      children.push(forkTs<PodsMessage>('bench/children/sizing-pods.ts', [redis.url, prefix, opts.dir, String(opts.slots), String(median), String(opts.sigma), String(opts.seed), String(judgeConcurrency)]));
    }
    await Promise.all(children.map((c) => c.next((m) => m.kind === 'ready')));
    log(`  ${topology}: Redis ${redis.url}, prefix ${prefix} (on ${await redis.holder(prefix)}), ${notes[0]}; ${opts.processes} pod processes ready`);
    const steps: SizingStep[] = [];
    for (const target of opts.steps) {
      const pods = Math.ceil(target / opts.slots);
      const t = performance.now();
      await Promise.all(children.map((c, i) => ask(c, { kind: 'scale', pods: Math.floor(pods / opts.processes) + (i < pods % opts.processes ? 1 : 0) }, 'scaled')));
      log(`  ${topology} ${fmtInt(target)} in flight: ${fmtInt(pods)} pods up in ${fmt((performance.now() - t) / 1000, 1)} s; warm-up ${opts.warmupS} s`);
      await sleep(opts.warmupS * 1000);
      const stats = () => Promise.all(children.map((c) => ask(c, { kind: 'stats' }, 'stats'))) as Promise<Array<Extract<PodsMessage, { kind: 'stats' }>>>;
      const [c0, p0, h0, ht0] = [await redis.counters(), await stats(), hostBusySeconds(), performance.now()];
      await ask(results, { kind: 'take' }, 'rows');
      const w0 = performance.now();
      const active: number[] = [];
      const memory: number[] = [];
      while (performance.now() - w0 < opts.windowS * 1000) {
        active.push(await queue.getActiveCount());
        memory.push((await redis.counters()).reduce((a, n) => a + n.counters.usedMemory, 0));
        await sleep(1000);
      }
      const taken = (await ask(results, { kind: 'take' }, 'rows')) as Extract<ResultsMessage, { kind: 'rows' }>;
      const windowS = (performance.now() - w0) / 1000;
      const [c1, p1, h1, ht1] = [await redis.counters(), await stats(), hostBusySeconds(), performance.now()];
      const hostBusy = (h1 - h0) / ((ht1 - ht0) / 1000);
      const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
      const inFlight = sum(active) / active.length;
      const lag = lagQuantiles(taken.lagsMs);
      const step: SizingStep = {
        target, inFlight, pods, windowS,
        rowsPerS: taken.rows / windowS,
        expectedRowsPerS: inFlight / opts.meanS,
        lagP50Ms: lag.p50, lagP95Ms: lag.p95,
        nodes: c1.map((n, i) => ({ name: n.name, ...nodeRates(c0[i].counters, n.counters, windowS) })),
        memoryPerRolloutB: (sum(memory) / memory.length - baseline) / inFlight,
        clients: sum(c1.map((n) => n.counters.clients)),
        topCommands: '',
        hostBusy, hostCores: os.cpus().length,
        renewCallsPerS: (sum(p1.map((p) => p.renewCalls)) - sum(p0.map((p) => p.renewCalls))) / windowS,
        locksRenewedPerS: (sum(p1.map((p) => p.locksRenewed)) - sum(p0.map((p) => p.locksRenewed))) / windowS,
      };
      const busiest = cpuOf(step).busiest;
      const at = c1.findIndex((n) => n.name === busiest);
      step.topCommands = topCommands(c0[at].counters, c1[at].counters, windowS);
      steps.push(step);
      const errors = sum(p1.map((p) => p.errors));
      const cpu = cpuOf(step);
      log(`  ${topology} ${fmtInt(target)}: ${fmt(step.rowsPerS, 1)} rows/s (expected ${fmt(step.expectedRowsPerS, 1)}), lag p50/p95 ${fmtInt(lag.p50)}/${fmtInt(lag.p95)} ms, ` +
        `in flight ${fmtInt(inFlight)}, Redis CPU ${fmt(cpu.max * 100, 0)}% (${cpu.busiest}), ${fmtInt(sum(step.nodes.map((n) => n.commandsPerS)))} cmds/s, ${fmtInt(step.memoryPerRolloutB)} B/rollout, ` +
        `host busy ${fmt(hostBusy, 2)} of ${os.cpus().length} cores, worker errors ${errors}${errors ? ` (last: ${p1.find((p) => p.lastError)?.lastError})` : ''}`);
      notes.push(`${fmtInt(target)}: host busy ${fmt(hostBusy, 2)} of ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(1)}, worker errors ${errors}`);
    }
    return { steps, notes };
  } finally {
    feeding = false;
    await feeder;
    await Promise.all(children.map(async (c) => {
      if (c.child.connected) c.child.send({ kind: 'stop' });
      if (!(await Promise.race([c.exited.then(() => true), sleep(20_000, false)]))) c.child.kill('SIGKILL');
    }));
    if (results) {
      if (results.child.connected) results.child.send({ kind: 'stop' });
      if (!(await Promise.race([results.exited.then(() => true), sleep(10_000, false)]))) results.child.kill('SIGKILL');
    }
    await queue.close();
    client.disconnect();
    await redis.stop();
  }
}

export async function benchSizing(opts: SizingOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const rows: BenchRow[] = [];
  const shape = `pods of ${opts.slots} slots in ${opts.processes} processes, rollouts lognormal mean ${opts.meanS} s (sigma ${opts.sigma}), warm-up ${opts.warmupS} s, window ${opts.windowS} s, backlog ${opts.backlog}`;
  for (const topology of opts.topologies) {
    const name = topology === 'single' ? 'one Redis' : 'Redis Cluster, 3 primaries';
    const { steps, notes } = await ladder(topology, opts, log);
    log(`\n${name}:\n${sizingTable(steps)}\n`);
    for (const s of steps) {
      const cpu = cpuOf(s);
      rows.push({
        bench: '15 sizing', metric: `${name}: ${fmtInt(s.target)} rollouts in flight`,
        value: `${fmt(s.rowsPerS, 1)} rows/s (expected ${fmt(s.expectedRowsPerS, 1)}), lag p95 ${fmtInt(s.lagP95Ms)} ms`,
        note: `held ${fmtInt(s.inFlight)} in flight on ${fmtInt(s.pods)} pods; Redis CPU ${fmt(cpu.max * 100, 0)}% of a core (busiest node ${cpu.busiest}${s.nodes.length > 1 ? `; all ${s.nodes.length} nodes ${fmt(cpu.sum * 100, 0)}%` : ''}); ` +
          `${fmtInt(s.nodes.reduce((a, n) => a + n.commandsPerS, 0))} commands/s; ${fmtInt(s.memoryPerRolloutB)} B of used_memory per rollout in flight; ` +
          `lock renewals ${fmt(s.renewCallsPerS, 1)} calls/s renewing ${fmt(s.locksRenewedPerS, 0)} locks/s; ${fmtInt(s.clients)} clients; lag p50 ${fmtInt(s.lagP50Ms)} ms; Redis time by command (busiest node): ${s.topCommands}; ${notes.find((n) => n.startsWith(`${fmtInt(s.target)}:`)) ?? ''}`,
      });
    }
    const knee = findKnee(steps);
    rows.push({
      bench: '15 sizing', metric: `${name}: the knee (first step where rows/s falls below 90% of in flight / mean duration, or the lag p95 doubles past 1 s)`,
      value: knee ? `${fmtInt(knee.target)} in flight` : `none up to ${fmtInt(Math.max(...opts.steps))}`,
      note: `${knee ? `${knee.reason}; ` : ''}${shape}; ${notes[0]}`,
    });
  }
  return rows;
}
