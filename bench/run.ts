/**
 * `npm run bench`: every benchmark of the fleet on this machine, on a private redis-server, one
 * table printed and written to bench/RESULTS.md. Every figure is a ratio or a count measured in this
 * run, side by side.
 *
 *   npm run bench                                  # everything, default sizes (~40 minutes on 2 cores; 15 alone ~20)
 *   npm run bench -- --only 1,3 --rollouts 2000    # a quick partial run (printed, not written)
 *   npm run bench -- --only 7,8                    # capacity and runtime heap of the real OpenCode (~10 minutes)
 *   npm run bench -- --only 7 --capacity-ladder 8,16,24,32,40,48 --out /tmp/ladder.md   # how far this host goes
 *   npm run bench -- --only 15 --sizing-steps 1000,4000,10000 --sizing-warmup-s 30 --sizing-window-s 30   # Redis sizing
 *
 * Flags (defaults in brackets):
 *   --only LIST              benchmarks to run, e.g. 1,3 [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]
 *   --rollouts N             1: rollouts per side [10000]
 *   --latency-samples N      1: unloaded latency samples, one at a time [300]
 *   --concurrency N          1: jobs at once in hops 1 and 2 (hop 3 is always 1) [8]
 *   --rounds N               1: rounds of each side, alternating order; medians reported [3]
 *   --util-tasks N           2: simulated rollouts [360]
 *   --util-processes K       2: sandbox-worker OS processes [2]
 *   --util-slots C           2: rollouts at once per process [4]
 *   --util-median-s S        2: median simulated agent duration in seconds [1.5]
 *   --util-sigma X           2: lognormal sigma (long tail) [0.75]
 *   --seed N                 2: seed of the durations [7]
 *   --scale-rollouts N       3: rollouts queued by the producer [100000]
 *   --scale-rows N           3: rows fed to the results consumer [100000]
 *   --agent-runs N           4: runs of each side [3]
 *   --prepare-rows N         5: parquet rows [388]
 *   --prepare-image-kb N     5: size of each random-noise PNG [130]
 *   --box-runs N             6: sandbox starts of each side, with and without the box (and docker) [15]
 *   --docker-image IMAGE     6: the sandbox image of the docker side [visual-coding-fleet-sandbox:ci]
 *   --box-session-runs N     6: harness rollouts of each side, docker vs local session start [3]
 *   --capacity-n LIST        7: sessions at once, fleet vs bare `opencode run` [1,2,4]
 *   --capacity-rounds N      7: rounds of each N, the sides alternating; medians reported [5]
 *   --capacity-ladder LIST   7: sessions at once in the ladder's steps; it stops at the first step not held [4,8,16]
 *   --capacity-concurrency fixed|auto
 *                            7: fixed: the worker takes `--concurrency N`; auto: `++queues.rollout_concurrency=auto`
 *                               (admission by memory), N x waves queued [fixed]
 *   --capacity-delay-s S     7: seconds the scripted policy takes per call in the ladder [5]
 *   --capacity-memory-mib M  7: sandbox_config.resources.memory_mib in the ladder [1024]
 *   --capacity-waves W       7: rollouts per ladder step = W x N [1]
 *   --capacity-reserve-mib M 7: a ladder step is stopped when MemAvailable falls below M MiB [2048]
 *   --first-call-runs N      7: in-process rollouts timed phase by phase to the first policy call [3]
 *   --warm-runs N            7: cold `opencode run`s and warm `opencode serve` hand-overs, bare and in the box [3]
 *   --heap-settings LIST     8: unset, a BUN_JSC_forceRAMSize in MiB, or smol [unset,2048,1024,512,256,smol]
 *   --heap-runs N            8: rollouts of each setting [3]
 *   --stop-runs N            9: timed stops of each kind (deadlines, aborts, an unreachable Redis) [5]
 *   --rejudge-masked N       10: masked rows rejudged, of a 388 x 8 run [1000]
 *   --rejudge-judge-ms N     10: milliseconds the scripted judge takes per call [40]
 *   --pacing-rollouts N      11: rollouts per side against the rate- and capacity-limited policy servers [6]
 *   --pacing-concurrency N   11: sessions at once of the sandbox-worker [4]
 *   --capture-runs N         12: rollouts of each side, token capture on and off [3]
 *   --serve-requests N,M     13: concurrent POST /run requests, and tasks of the `vcfleet run` side, one measure each [8,64]
 *   --serve-rounds N         13: interleaved rounds of both sides at each number (run serve, serve run, ...) [2]
 *   --serve-concurrency N    13: sandboxes at once on both sides [8]
 *   --serve-delay-s S        13: seconds the scripted policy takes per call [2]
 *   --sizing-steps LIST      15: rollouts in flight at each step [1000,2000,5000,10000]
 *   --sizing-topologies LIST 15: single (one redis-server) and/or cluster (3 primaries) [single,cluster]
 *   --sizing-warmup-s S      15: seconds each step runs before it is measured [60]
 *   --sizing-window-s S      15: seconds each step is measured [60]
 *   --sizing-mean-s S        15: mean simulated rollout duration, lognormal [60]
 *   --sizing-sigma X         15: lognormal sigma of the durations [0.6]
 *   --sizing-slots N         15: rollouts at once per simulated sandbox-worker pod [8]
 *   --sizing-processes N     15: OS processes the simulated pods are spread over [4]
 *   --sizing-backlog N       15: rollout jobs kept waiting [500]
 *   --sizing-maxclients N    15: maxclients of every Redis node (capped by ulimit -n) [20000]
 *   --out FILE               where to write the table [bench/RESULTS.md when every benchmark ran]
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { markdownTable, type BenchRow } from './lib/report.ts';
import { startBenchRedis } from './lib/redis-server.ts';
import { fmt } from './lib/stats.ts';

const DEFAULTS = {
  only: '1,2,3,4,5,6,7,8,9,10,11,12,13,14,15',
  rollouts: 10000,
  'latency-samples': 300,
  concurrency: 8,
  rounds: 3,
  'util-tasks': 360,
  'util-processes': 2,
  'util-slots': 4,
  'util-median-s': 1.5,
  'util-sigma': 0.75,
  seed: 7,
  'scale-rollouts': 100000,
  'scale-rows': 100000,
  'agent-runs': 3,
  'prepare-rows': 388,
  'prepare-image-kb': 130,
  'box-runs': 15,
  'docker-image': 'visual-coding-fleet-sandbox:ci',
  'box-session-runs': 3,
  'capacity-n': '1,2,4',
  'capacity-rounds': 5,
  'capacity-ladder': '4,8,16',
  'capacity-concurrency': 'fixed',
  'capacity-delay-s': 5,
  'capacity-memory-mib': 1024,
  'capacity-waves': 1,
  'capacity-reserve-mib': 2048,
  'first-call-runs': 3,
  'warm-runs': 3,
  'heap-settings': 'unset,2048,1024,512,256,smol',
  'heap-runs': 3,
  'stop-runs': 5,
  'rejudge-masked': 1000,
  'rejudge-judge-ms': 40,
  'pacing-rollouts': 6,
  'pacing-concurrency': 4,
  'capture-runs': 3,
  'serve-requests': '8,64',
  'serve-rounds': 2,
  'serve-concurrency': 8,
  'serve-delay-s': 2,
  'sizing-steps': '1000,2000,5000,10000',
  'sizing-topologies': 'single,cluster',
  'sizing-warmup-s': 60,
  'sizing-window-s': 60,
  'sizing-mean-s': 60,
  'sizing-sigma': 0.6,
  'sizing-slots': 8,
  'sizing-processes': 4,
  'sizing-backlog': 500,
  'sizing-maxclients': 20000,
  out: '',
};
type Flags = typeof DEFAULTS;

/** Everything from this line to the end of the results file is kept when the table is written again. */
const NOTES_MARKER = '<!-- notes below: kept when npm run bench writes this file again -->';

function parseFlags(argv: string[]): { flags: Flags; changed: Set<string> } {
  const flags: Record<string, string | number> = { ...DEFAULTS };
  const changed = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m || !(m[1] in DEFAULTS)) throw new Error(`unknown argument ${argv[i]} (see the flags at the top of bench/run.ts)`);
    const raw = m[2] ?? argv[++i];
    if (raw === undefined) throw new Error(`--${m[1]} needs a value`);
    const def = DEFAULTS[m[1] as keyof Flags];
    const value = typeof def === 'number' ? Number(raw) : raw;
    if (typeof value === 'number' && !(value > 0)) throw new Error(`--${m[1]} must be a positive number, got ${raw}`);
    flags[m[1]] = value;
    changed.add(m[1]);
  }
  return { flags: flags as Flags, changed };
}

function numberList(raw: string, flag: string): number[] {
  const list = raw.split(',').map((x) => Number(x.trim()));
  if (list.length === 0 || list.some((n) => !Number.isInteger(n) || n <= 0)) throw new Error(`--${flag} takes positive whole numbers separated by commas, got ${raw}`);
  return list;
}

async function machine(url: string): Promise<string> {
  const redis = new Redis(url);
  const info = await redis.info('server');
  redis.disconnect();
  const version = /redis_version:(\S+)/.exec(info)?.[1] ?? '?';
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  return `${os.cpus().length} cores (${cpu}), ${fmt(os.totalmem() / 2 ** 30, 1)} GiB RAM, Node ${process.version}, Redis ${version}, ${os.platform()} ${os.release()}`;
}

async function main(): Promise<void> {
  const { flags, changed } = parseFlags(process.argv.slice(2));
  const only = new Set(flags.only.split(',').map((s) => s.trim()).filter(Boolean));
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const started = performance.now();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'vcfleet-bench-'));
  const redis = await startBenchRedis();
  const rows: BenchRow[] = [];
  const timings: string[] = [];
  const step = async (id: string, title: string, fn: () => Promise<BenchRow[]>) => {
    if (!only.has(id)) return;
    log(`[bench ${id}] ${title} ...`);
    const t = performance.now();
    try {
      rows.push(...(await fn()));
    } catch (err) {
      rows.push({ bench: `${id} ${title}`, metric: 'FAILED', value: 'n/a', note: (err as Error).stack?.split('\n').slice(0, 3).join(' ') ?? String(err) });
      log(`[bench ${id}] failed: ${(err as Error).stack}`);
    }
    const s = (performance.now() - t) / 1000;
    timings.push(`${id} ${title}: ${fmt(s, 0)} s`);
    log(`[bench ${id}] done in ${fmt(s, 1)} s`);
  };
  let header = '';
  try {
    header = await machine(redis.url);
    await step('1', 'overhead', async () =>
      (await import('./overhead.ts')).benchOverhead({ redisUrl: redis.url, dir, rollouts: flags.rollouts, latencySamples: flags['latency-samples'], concurrency: flags.concurrency, rounds: flags.rounds, log }));
    await step('2', 'utilization', async () =>
      (await import('./utilization.ts')).benchUtilization({
        redisUrl: redis.url, dir, tasks: flags['util-tasks'], processes: flags['util-processes'], slots: flags['util-slots'],
        medianS: flags['util-median-s'], sigma: flags['util-sigma'], seed: flags.seed, log,
      }));
    await step('3', 'scale', async () =>
      (await import('./scale.ts')).benchScale({ redis, dir, rollouts: flags['scale-rollouts'], rows: flags['scale-rows'], log }));
    await step('4', 'real agent', async () => (await import('./real-agent.ts')).benchRealAgent({ dir, runs: flags['agent-runs'], log }));
    await step('5', 'prepare', async () =>
      (await import('./prepare.ts')).benchPrepare({ dir, rows: flags['prepare-rows'], imageKb: flags['prepare-image-kb'], log }));
    await step('6', 'box', async () => (await import('./box.ts')).benchBox({ dir, runs: flags['box-runs'], dockerImage: flags['docker-image'], sessionRuns: flags['box-session-runs'], log }));
    await step('7', 'capacity', async () => {
      const admission = flags['capacity-concurrency'];
      if (admission !== 'fixed' && admission !== 'auto') throw new Error(`--capacity-concurrency must be fixed or auto, got ${admission}`);
      return (await import('./capacity.ts')).benchCapacity({
        redisUrl: redis.url, dir, ns: numberList(flags['capacity-n'], 'capacity-n'), rounds: flags['capacity-rounds'],
        ladder: numberList(flags['capacity-ladder'], 'capacity-ladder'), admission, delayS: flags['capacity-delay-s'],
        memoryMib: flags['capacity-memory-mib'], waves: flags['capacity-waves'], reserveMib: flags['capacity-reserve-mib'],
        firstCallRuns: flags['first-call-runs'], warmRuns: flags['warm-runs'], log,
      });
    });
    await step('8', 'runtime heap', async () =>
      (await import('./heap.ts')).benchHeap({ dir, settings: flags['heap-settings'].split(',').map((x) => x.trim()).filter(Boolean), runs: flags['heap-runs'], log }));
    await step('9', 'stops', async () => (await import('./stops.ts')).benchStops({ dir, runs: flags['stop-runs'], log }));
    await step('10', 'rejudge', async () =>
      (await import('./requeue.ts')).benchRequeue({ redisUrl: redis.url, dir, tasks: 388, repeats: 8, masked: flags['rejudge-masked'], judgeMs: flags['rejudge-judge-ms'], log }));
    await step('11', 'pacing', async () =>
      (await import('./pacing.ts')).benchPacing({ redisUrl: redis.url, dir, rollouts: flags['pacing-rollouts'], concurrency: flags['pacing-concurrency'], log }));
    await step('12', 'token capture', async () => (await import('./token-capture.ts')).benchTokenCapture({ dir, runs: flags['capture-runs'], log }));
    await step('13', 'serve', async () =>
      (await import('./serve.ts')).benchServe({
        redisUrl: redis.url, dir, requests: numberList(flags['serve-requests'], 'serve-requests'), rounds: flags['serve-rounds'], concurrency: flags['serve-concurrency'], delayS: flags['serve-delay-s'], log }));
    await step('14', 'token chain', async () => (await import('./token-chain.ts')).benchTokenChain({ dir, log }));
    await step('15', 'sizing', async () => {
      const topologies = flags['sizing-topologies'].split(',').map((x) => x.trim()).filter(Boolean);
      const bad = topologies.filter((t) => t !== 'single' && t !== 'cluster');
      if (topologies.length === 0 || bad.length) throw new Error(`--sizing-topologies takes single and/or cluster, got ${flags['sizing-topologies']}`);
      return (await import('./sizing.ts')).benchSizing({
        dir, steps: numberList(flags['sizing-steps'], 'sizing-steps'), topologies: topologies as Array<'single' | 'cluster'>,
        warmupS: flags['sizing-warmup-s'], windowS: flags['sizing-window-s'], meanS: flags['sizing-mean-s'], sigma: flags['sizing-sigma'],
        slots: flags['sizing-slots'], processes: flags['sizing-processes'], backlog: flags['sizing-backlog'], maxclients: flags['sizing-maxclients'], seed: flags.seed, log,
      });
    });
  } finally {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const totalS = (performance.now() - started) / 1000;
  const table = markdownTable(rows);
  const args = process.argv.slice(2).join(' ');
  const doc = [
    '# Benchmark results',
    '',
    `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`npm run bench${args ? ` -- ${args}` : ''}\` on ${header}.`,
    `Whole run: ${fmt(totalS, 0)} s (${timings.join('; ')}).`,
    '',
    table,
    '',
  ].join('\n');
  process.stdout.write(`\n${table}\n\nWhole run: ${fmt(totalS, 1)} s\n`);
  const partial = DEFAULTS.only.split(',').some((id) => !only.has(id)) || [...changed].some((k) => k !== 'out');
  const out = flags.out || (partial ? '' : path.join(import.meta.dirname, 'RESULTS.md'));
  if (out) {
    // Write-ups below the notes marker of the file (what the figures mean, what was tried) are kept.
    const old = existsSync(out) ? readFileSync(out, 'utf8') : '';
    const notes = old.includes(NOTES_MARKER) ? old.slice(old.indexOf(NOTES_MARKER)) : '';
    writeFileSync(out, notes ? `${doc}\n${notes}` : doc);
    log(`written to ${out}`);
  } else log('partial run: not written to bench/RESULTS.md (pass --out FILE to keep it)');
  if (rows.some((r) => r.metric === 'FAILED')) process.exitCode = 1;
}

await main();
