/**
 * Benchmark 7, capacity: the real OpenCode, one bash tool call then the boxed answer (the scripted
 * policy's `pythonThenAnswer`), in four parts.
 *
 * 1. N concurrent rollouts through the fleet (a `vcfleet worker sandbox` process, `local` sandboxes
 *    with every limit, judge and results in this process) against N concurrent bare `opencode run`s
 *    on the host (benchmark 4's invocation), for each N; sides alternate from round to round and the
 *    ratio of makespans is the median over rounds. Each session's PSS (its whole process tree,
 *    sampled) is kept for the per-session memory rows.
 * 2. Time to the first policy call: from the fleet's transcripts (rollout start -> first call), and
 *    phase by phase from in-process harness rollouts (gateway, sandbox up, files in, OpenCode start).
 * 3. Warm start (warm-start.ts): `opencode serve` started before the task, the task handed over after.
 * 4. A ladder of N with a policy that takes a fixed time per call and a low sandbox memory limit:
 *    per step, one fresh worker with `--concurrency N` (or `++queues.rollout_concurrency=auto`),
 *    W x N rollouts, the host's MemAvailable, swap and OOM kills watched; a step that would take the
 *    host below the reserve is stopped. The largest N held and its rollouts per hour are reported.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { startScriptedPolicyServer, type Script, type ScriptedPolicyServer } from '../src/demo/scripted-policy-server.ts';
import { scripts } from '../src/demo/scripted-policy-scripts.ts';
import { errorMessage } from '../src/shared/errors.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { Fleet, type WaveResult } from './lib/fleet-wave.ts';
import { childless, cpuDelta, cpuSeconds, hostBusySeconds } from './lib/cpu.ts';
import { hostMemory, hostOomKills, MemoryWatch, type MemoryReport, type SessionMemory } from './lib/memory.ts';
import { bareRun, firstCallAt, harnessRun, MODEL } from './lib/opencode-session.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, fmtInt, median, quantile } from './lib/stats.ts';
import { benchWarmStart } from './warm-start.ts';

export interface CapacityOptions {
  redisUrl: string;
  dir: string;
  /** Concurrent sessions compared, fleet vs bare. Default 1, 2, 4. */
  ns: number[];
  /** Rounds of each N, sides alternating. Default 5. */
  rounds: number;
  /** Concurrent sessions of the ladder's steps. Default 4, 8, 16. */
  ladder: number[];
  /** fixed: `--concurrency N` per step; auto: `++queues.rollout_concurrency=auto` with N x waves queued. */
  admission: 'fixed' | 'auto';
  /** Seconds the scripted policy takes per call in the ladder. Default 5. */
  delayS: number;
  /** `sandbox_config.resources.memory_mib` in the ladder. Default 1024. */
  memoryMib: number;
  /** Rollouts per ladder step: waves x N. Default 1. */
  waves: number;
  /** A ladder step stops when MemAvailable falls below this many MiB. Default 2048. */
  reserveMib: number;
  /** In-process rollouts timed phase by phase to the first call. Default 3. */
  firstCallRuns: number;
  /** Cold/warm start runs, bare and in the box. Default 3. */
  warmRuns: number;
  log?: (line: string) => void;
}

const ONE_TOOL = scripts.pythonThenAnswer('A');
const MIB = 1024;

function delayed(script: Script, ms: number): Script {
  return async (body, index, ctx) => {
    await sleep(ms);
    return script(body, index, ctx);
  };
}

const medianPeak = (s: SessionMemory[]) => median(s.map((x) => x.peakKib)) / MIB;
const medianMean = (s: SessionMemory[]) => median(s.map((x) => x.meanKib)) / MIB;
const load = () => os.loadavg().map((x) => fmt(x, 1)).join(' / ');

/** N concurrent bare `opencode run`s, each with its own scripted server (so first calls can be told apart). */
async function bareWave(n: number, dir: string, tag: string): Promise<{ makespanS: number; memory: MemoryReport; firstCallS: number[] }> {
  const servers = await Promise.all(Array.from({ length: n }, () => startScriptedPolicyServer({ script: ONE_TOOL, modelName: MODEL })));
  const watch = new MemoryWatch();
  const t0 = performance.now();
  try {
    const runs = await Promise.all(servers.map((s, i) => bareRun(s, dir, `${tag}-${i}`, { onSpawn: (pid) => watch.add(pid) })));
    const makespanS = (performance.now() - t0) / 1000;
    return { makespanS, memory: watch.stop(), firstCallS: runs.map((r, i) => (firstCallAt(servers[i], r.startedAt) - r.startedAt) / 1000) };
  } finally {
    watch.stop();
    await Promise.all(servers.map((s) => s.close()));
  }
}

function checkRows(w: WaveResult, n: number): void {
  if (w.stopped) throw new Error(`the fleet wave of ${n} stopped: ${w.stopped}`);
  const bad = w.rows.filter((r) => r.extracted_answer !== 'A');
  if (bad.length) throw new Error(`${bad.length} of ${n} fleet rollouts did not answer A: ${bad.map((r) => `${r.stop_reason} ${r.error ?? ''}`).join('; ').slice(0, 500)}`);
}

async function concurrencyPart(opts: CapacityOptions, server: ScriptedPolicyServer, dir: string, log: (l: string) => void) {
  const fleet = new Fleet({ redisUrl: opts.redisUrl, dir, policyUrl: server.url, concurrency: Math.max(...opts.ns) });
  const perN: Array<{ n: number; ratios: number[]; fleetS: number[]; bareS: number[] }> = [];
  const cpu: CpuSplit = { rollouts: 0, fleetHost: 0, fleetWorker: 0, fleetBench: 0, bareHost: 0, bareSessions: 0, bareBench: 0 };
  const bareSessions: SessionMemory[] = [];
  const boxSessions: SessionMemory[] = [];
  const fleetFirst = new Map<number, number[]>();
  const bareFirst: number[] = [];
  let workerPeakKib = 0;
  try {
    await fleet.start();
    // One untimed bare run loads the binary into the page cache for both sides.
    await bareRun(server, dir, 'warm');
    for (const n of opts.ns) {
      const entry = { n, ratios: [] as number[], fleetS: [] as number[], bareS: [] as number[] };
      for (let round = 1; round <= opts.rounds; round++) {
        const runFleet = async () => {
          const [host0, worker0, bench0] = [hostBusySeconds(), cpuSeconds(fleet.workerPid), process.cpuUsage()];
          const w = await fleet.wave(n, `n${n}r${round}`);
          // A sandbox's CPU reaches the worker's children count when bwrap is reaped (teardown may trail the row).
          for (let i = 0; i < 40 && !childless(fleet.workerPid); i++) await sleep(50);
          cpu.fleetHost += hostBusySeconds() - host0;
          cpu.fleetWorker += cpuDelta(worker0, cpuSeconds(fleet.workerPid)).self;
          cpu.fleetBench += cpuUsageS(process.cpuUsage(bench0));
          cpu.rollouts += n;
          checkRows(w, n);
          boxSessions.push(...w.memory.sessions);
          workerPeakKib = Math.max(workerPeakKib, w.memory.parentPeakKib);
          fleetFirst.set(n, [...(fleetFirst.get(n) ?? []), ...w.firstCallS]);
          return w.makespanS;
        };
        const runBare = async () => {
          const [host0, own0, bench0] = [hostBusySeconds(), cpuSeconds(process.pid), process.cpuUsage()];
          const b = await bareWave(n, dir, `n${n}r${round}`);
          cpu.bareHost += hostBusySeconds() - host0;
          cpu.bareSessions += cpuDelta(own0, cpuSeconds(process.pid)).children;
          cpu.bareBench += cpuUsageS(process.cpuUsage(bench0));
          bareSessions.push(...b.memory.sessions);
          if (n === 1) bareFirst.push(...b.firstCallS);
          return b.makespanS;
        };
        let f: number;
        let b: number;
        if (round % 2) (f = await runFleet()), (b = await runBare());
        else (b = await runBare()), (f = await runFleet());
        entry.fleetS.push(f);
        entry.bareS.push(b);
        entry.ratios.push(f / b);
        log(`  N=${n} round ${round}: fleet ${fmt(f)} s, bare ${fmt(b)} s (ratio ${fmt(f / b)}; load ${load()})`);
      }
      perN.push(entry);
    }
  } finally {
    await fleet.close();
  }
  return { perN, bareSessions, boxSessions, fleetFirst, bareFirst, workerPeakKib, cpu };
}

/** CPU seconds over every round of every N, by where they were spent (`bench/lib/cpu.ts`). */
interface CpuSplit {
  /** Rollouts of each side. */
  rollouts: number;
  /** The whole host during fleet waves. */
  fleetHost: number;
  /** The sandbox-worker process itself: jobs, gateway, sandbox set-up and teardown, transcripts. */
  fleetWorker: number;
  /** This process during fleet waves: the policy server, the memory watch, the producer, the judge and results roles. */
  fleetBench: number;
  /** The whole host during bare waves. */
  bareHost: number;
  /** `opencode run` and its tools, as this process reaped them. */
  bareSessions: number;
  /** This process during bare waves: the policy servers and the memory watch. */
  bareBench: number;
}

const cpuUsageS = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;

function cpuRow(c: CpuSplit): BenchRow {
  const per = (x: number) => x / c.rollouts;
  const [fleet, bare] = [per(c.fleetHost), per(c.bareHost)];
  return {
    bench: '7 capacity', metric: 'CPU per rollout (the whole host), fleet / bare', value: `${fmt(fleet)} / ${fmt(bare)} s (${fmt(fleet / bare)})`,
    note: `over the ${c.rollouts} rollouts of each side above, /proc/stat before and after each wave. Fleet: the sandbox-worker process ${fmt(per(c.fleetWorker))} s, this process (policy server, memory watch, producer, judge and results roles) ${fmt(per(c.fleetBench))} s, the rest (the sessions in their sandboxes: OpenCode, its tools, bwrap, the entry and its gateway bridge; and whatever else ran) ${fmt(per(c.fleetHost - c.fleetWorker - c.fleetBench))} s. Bare: this process (policy servers, memory watch) ${fmt(per(c.bareBench))} s, the rest ${fmt(per(c.bareHost - c.bareBench))} s, of which \`opencode run\` and its tools as reaped ${fmt(per(c.bareSessions))} s`,
  };
}

/**
 * What the box costs under load: N rollouts of the in-process harness at once, with every limit and
 * without (benchmark 6 times one sandbox start alone); sides alternate, medians of makespans.
 */
async function boxUnderLoad(n: number, rounds: number, server: ScriptedPolicyServer, dir: string, log: (l: string) => void) {
  const wave = async (box: boolean, tag: string) => {
    const t = performance.now();
    await Promise.all(Array.from({ length: n }, (_, i) => harnessRun(server, dir, `bench-box${box ? 'ed' : 'less'}-${tag}-${i}`, { box })));
    return (performance.now() - t) / 1000;
  };
  const [boxed, bare]: [number[], number[]] = [[], []];
  for (let round = 1; round <= rounds; round++) {
    if (round % 2) boxed.push(await wave(true, String(round))), bare.push(await wave(false, String(round)));
    else bare.push(await wave(false, String(round))), boxed.push(await wave(true, String(round)));
    log(`  box under load, N=${n} round ${round}: with limits ${fmt(boxed.at(-1)!)} s, without ${fmt(bare.at(-1)!)} s`);
  }
  return { boxed, bare };
}

/** In-process rollouts of the whole harness, timed phase by phase up to the first policy call. */
async function firstCallPart(runs: number, server: ScriptedPolicyServer, dir: string) {
  const parts: Array<Record<string, number>> = [];
  for (let i = 1; i <= runs; i++) {
    const h = await harnessRun(server, dir, `bench-first-${i}`);
    const first = firstCallAt(server, h.startedAt);
    const up = h.phases['sandbox up'] ?? 0;
    const files = h.phases['files in'] ?? 0;
    const beforeSession = (h.sessionStartedAt - h.startedAt) / 1000;
    parts.push({
      total: (first - h.startedAt) / 1000,
      'gateway up and the rest': beforeSession - up - files,
      'sandbox up': up,
      'files in': files,
      'OpenCode start -> first call': (first - h.sessionStartedAt) / 1000,
    });
  }
  return parts;
}

interface LadderStep {
  n: number;
  held: boolean;
  why: string;
  wave: WaveResult | null;
  perHour: number;
  hostOoms: number;
  sandboxOoms: number;
}

async function ladderPart(opts: CapacityOptions, dir: string, log: (l: string) => void): Promise<LadderStep[]> {
  const server = await startScriptedPolicyServer({ script: delayed(ONE_TOOL, opts.delayS * 1000), modelName: MODEL });
  const steps: LadderStep[] = [];
  try {
    for (const n of opts.ladder) {
      const count = n * opts.waves;
      const fleet = new Fleet({
        redisUrl: opts.redisUrl, dir, policyUrl: server.url, concurrency: opts.admission === 'auto' ? 'auto' : n, globalCap: Math.max(32, count), memoryMib: opts.memoryMib,
      });
      const oomBefore = hostOomKills();
      let wave: WaveResult | null = null;
      let why = '';
      try {
        await fleet.start();
        wave = await fleet.wave(count, `ladder${n}`, {
          onSample: (host, _total, stop) => {
            if (host.availableKib < opts.reserveMib * MIB) stop(`MemAvailable fell to ${fmtInt(host.availableKib / MIB)} MiB (reserve ${opts.reserveMib} MiB)`);
          },
        });
      } catch (err) {
        why = `did not run: ${errorMessage(err).split('\n')[0].slice(0, 300)}`;
      } finally {
        await fleet.close();
      }
      const hostOoms = hostOomKills() - oomBefore;
      const sandboxOoms = wave ? wave.rows.reduce((a, r) => a + (r.limit_hits.memory ?? 0), 0) : 0;
      const answered = wave ? wave.rows.filter((r) => r.extracted_answer === 'A').length : 0;
      if (!why && wave?.stopped) why = `stopped: ${wave.stopped}`;
      if (!why && answered < count) why = `${count - answered} of ${count} rollouts without the answer (${[...new Set(wave!.rows.filter((r) => r.extracted_answer !== 'A').map((r) => r.error ?? r.stop_reason))].join('; ').slice(0, 200)})`;
      if (!why && hostOoms > 0) why = `${hostOoms} OOM kills on the host`;
      if (!why && sandboxOoms > 0) why = `${sandboxOoms} OOM kills in sandboxes`;
      if (!why && wave && wave.memory.swapGrowthKib > 0) why = `swap in use grew by ${fmtInt(wave.memory.swapGrowthKib / MIB)} MiB`;
      const held = why === '';
      const perHour = wave && !wave.stopped ? (wave.rows.length / wave.makespanS) * 3600 : Number.NaN;
      steps.push({ n, held, why, wave, perHour, hostOoms, sandboxOoms });
      log(`  ladder N=${n}: ${held ? 'held' : `NOT held (${why})`}; ${wave ? `${fmt(wave.makespanS, 1)} s, ${fmtInt(perHour)} rollouts/h, ${wave.memory.maxSessions} sessions at once, MemAvailable min ${fmtInt(wave.memory.minAvailableKib / MIB)} MiB` : ''}; load ${load()}`);
      if (!held) break;
    }
  } finally {
    await server.close();
  }
  return steps;
}

function ladderRows(opts: CapacityOptions, steps: LadderStep[]): BenchRow[] {
  const admission = opts.admission === 'auto' ? '`++queues.rollout_concurrency=auto`' : '`--concurrency N`';
  const rows: BenchRow[] = steps.map((s) => {
    const w = s.wave;
    const m = w?.memory;
    return {
      bench: '7 capacity',
      metric: `ladder N=${s.n}: ${s.n * opts.waves} rollouts, policy ${opts.delayS} s per call, memory_mib ${opts.memoryMib}`,
      value: s.held ? `held, ${fmtInt(s.perHour)} rollouts/h` : 'not held',
      note: [
        s.held ? '' : `${s.why}; `,
        w ? `makespan ${fmt(w.makespanS, 1)} s; ${m!.maxSessions} sessions at once (${admission}); ` : '',
        m && m.sessions.length ? `PSS per session peak ${fmtInt(medianPeak(m.sessions))} MiB (median; max ${fmtInt(Math.max(...m.sessions.map((x) => x.peakKib)) / MIB)}), mean ${fmtInt(medianMean(m.sessions))} MiB; all sessions at once ${fmtInt(m.peakTotalKib / MIB)} MiB; ` : '',
        m ? `MemAvailable min ${fmtInt(m.minAvailableKib / MIB)} MiB; swap ${m.swapTotalKib ? `grew ${fmtInt(m.swapGrowthKib / MIB)} MiB` : 'none configured'}; ` : '',
        `OOM kills: host ${s.hostOoms}, sandboxes (limit_hits) ${s.sandboxOoms}`,
        m ? `; memory sampled every ${fmt(Math.max(0.5, (4 * m.sampleMs) / 1000), 1)} s or more (a sample took ${fmtInt(m.sampleMs)} ms)` : '',
        w && w.firstCallS.length ? `; first policy call after ${fmt(median(w.firstCallS), 1)} s (median; p90 ${fmt(quantile(w.firstCallS, 0.9), 1)} s)` : '',
      ].join(''),
    };
  });
  const held = steps.filter((s) => s.held);
  const best = held.reduce<LadderStep | null>((a, s) => (a && a.perHour >= s.perHour ? a : s), null);
  const largest = held.length ? held[held.length - 1] : null;
  const tried = steps.map((s) => s.n).join(', ');
  rows.push({
    bench: '7 capacity', metric: 'largest N held (no OOM kill, no swap, every rollout answered, MemAvailable above the reserve)',
    value: largest ? String(largest.n) : 'none',
    note: largest
      ? `${fmtInt(largest.perHour)} rollouts/h at N=${largest.n}; most rollouts/h: ${fmtInt(best!.perHour)} at N=${best!.n}; steps tried ${tried}${steps.length === held.length ? ' (all held: the ceiling is above; pass a longer --capacity-ladder)' : ''}; reserve ${opts.reserveMib} MiB`
      : `steps tried ${tried}`,
  });
  return rows;
}

export async function benchCapacity(opts: CapacityOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const dir = mkdtempSync(path.join(opts.dir, 'capacity-'));
  const server = await startScriptedPolicyServer({ script: ONE_TOOL, modelName: MODEL });
  const rows: BenchRow[] = [];
  try {
    const c = await concurrencyPart(opts, server, dir, log);
    for (const e of c.perN) {
      const r = median(e.ratios);
      rows.push({
        bench: '7 capacity', metric: `fleet / bare \`opencode run\`, makespan of N=${e.n} at once`, value: fmt(r), target: '<= 1.05', ok: r <= 1.05,
        note: `median of ${opts.rounds} rounds (${e.ratios.map((x) => fmt(x)).join(', ')}): fleet ${e.fleetS.map((x) => fmt(x, 1)).join(', ')} s, bare ${e.bareS.map((x) => fmt(x, 1)).join(', ')} s; one bash tool call (Python, Pillow) then the answer, policy answers at once`,
      });
    }
    rows.push(cpuRow(c.cpu));
    const [bp, xp] = [medianPeak(c.bareSessions), medianPeak(c.boxSessions)];
    rows.push({
      bench: '7 capacity', metric: 'PSS per session, bare / in the box: peak', value: `${fmtInt(bp)} / ${fmtInt(xp)} MiB`,
      note: `mean over each session ${fmtInt(medianMean(c.bareSessions))} / ${fmtInt(medianMean(c.boxSessions))} MiB; medians over ${c.bareSessions.length} / ${c.boxSessions.length} sessions of every N; the whole process tree sampled every 0.5 s (in the box: bwrap, the entry and its gateway bridge, OpenCode, its tools); the sandbox-worker process itself ${fmtInt(c.workerPeakKib / MIB)} MiB at its peak, shared by its sessions`,
    });
    rows.push({
      bench: '7 capacity', metric: 'sessions per GiB, bare / in the box (by peak PSS)', value: `${fmt(1024 / bp)} / ${fmt(1024 / xp)}`,
      note: 'how many sessions fit per GiB if each holds its peak at once; the box costs in start time, not memory: sandbox start with limits / without is benchmark 6 (`--only 6`), sandbox up is in the next row',
    });
    const nMax = Math.max(...opts.ns);
    const box = await boxUnderLoad(nMax, opts.rounds, server, dir, log);
    rows.push({
      bench: '7 capacity', metric: `the box under load: N=${nMax} harness rollouts at once, with limits / without`, value: fmt(median(box.boxed) / median(box.bare)),
      note: `medians of ${opts.rounds}: ${box.boxed.map((x) => fmt(x, 1)).join(', ')} s vs ${box.bare.map((x) => fmt(x, 1)).join(', ')} s; the same in-process harness with the \`local\` provider's cgroup, tmpfs disk, seccomp filter and rlimits, and without them (one sandbox start alone: benchmark 6)`,
    });
    const first = await firstCallPart(opts.firstCallRuns, server, dir);
    const fleetFirst = c.fleetFirst;
    rows.push({
      bench: '7 capacity', metric: 'time to the first policy call, rollout start -> first call (fleet, N=1)', value: `${fmt(median(fleetFirst.get(1) ?? []))} s`,
      note: `medians of the fleet's rollouts by N: ${[...fleetFirst].map(([n, v]) => `N=${n} ${fmt(median(v))} s`).join(', ')}; bare \`opencode run\` spawn -> first call ${fmt(median(c.bareFirst))} s`,
    });
    rows.push({
      bench: '7 capacity', metric: 'time to the first policy call, its parts (in-process harness, one at a time)', value: `${fmt(median(first.map((p) => p.total)))} s`,
      note: `medians of ${first.length}: ${Object.keys(first[0]).filter((k) => k !== 'total').map((k) => `${k} ${fmt(median(first.map((p) => p[k])))} s`).join(', ')}`,
    });
    rows.push(...(await benchWarmStart({ dir, runs: opts.warmRuns, coldBoxS: median(first.map((p) => p['OpenCode start -> first call'])), log })));
    log(`  ladder: ${opts.ladder.join(', ')} (host MemAvailable ${fmtInt(hostMemory().availableKib / MIB)} MiB now)`);
    rows.push(...ladderRows(opts, await ladderPart(opts, dir, log)));
    return rows;
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
