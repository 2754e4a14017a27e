/**
 * Memory as the capacity benchmarks watch it, from /proc (Linux only): the PSS of a session's whole
 * process tree (from each process's smaps_rollup, so pages shared between sessions, such as the
 * OpenCode binary's, count once across them), sampled over the session's life for its peak and
 * mean; and the host's MemAvailable, swap in use and OOM kills (`oom_kill` of /proc/vmstat counts
 * every OOM kill, a cgroup's included).
 */
import { readFileSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';

/**
 * The children of `pid` (of every one of its threads), from /proc/<pid>/task/<tid>/children: a
 * sample reads the watched trees only, not every process of the host, so watching costs the same
 * whatever else runs (it was a whole /proc scan, which cost the side it watched ~0.5 s of CPU per
 * rollout).
 */
async function childrenOf(pid: number): Promise<number[]> {
  const tids = await readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
  const lists = await Promise.all(tids.map((tid) => readFile(`/proc/${pid}/task/${tid}/children`, 'utf8').catch(() => '')));
  return lists.flatMap((l) => l.split(' ').filter(Boolean).map(Number));
}

/** `root` and every process below it. */
async function subtree(root: number): Promise<number[]> {
  const out = [root];
  for (let i = 0; i < out.length; i++) out.push(...(await childrenOf(out[i])));
  return out;
}

const isAlive = (pid: number) => readFile(`/proc/${pid}/stat`, 'utf8').then(() => true, () => false);

/** PSS of one process in KiB (0 once it is gone or for a kernel thread). */
export async function pssKib(pid: number): Promise<number> {
  const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
  const m = /^Pss:\s+(\d+) kB/m.exec(text);
  return m ? Number(m[1]) : 0;
}

async function cmdline(pid: number): Promise<string> {
  return (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).replace(/\0/g, ' ');
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

export interface HostMemory {
  availableKib: number;
  swapUsedKib: number;
  swapTotalKib: number;
}

export function hostMemory(): HostMemory {
  const text = readFileSync('/proc/meminfo', 'utf8');
  const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
  return { availableKib: kib('MemAvailable'), swapUsedKib: kib('SwapTotal') - kib('SwapFree'), swapTotalKib: kib('SwapTotal') };
}

/** OOM kills on this host since boot (every memory cgroup's included), or NaN when the kernel does not count them. */
export function hostOomKills(): number {
  const m = /^oom_kill (\d+)$/m.exec(readFileSync('/proc/vmstat', 'utf8'));
  return m ? Number(m[1]) : Number.NaN;
}

export interface SessionMemory {
  /** The session's root process. */
  root: number;
  peakKib: number;
  meanKib: number;
  samples: number;
  /** Processes seen in the tree at its largest. */
  maxProcesses: number;
}

export interface MemoryReport {
  sessions: SessionMemory[];
  /** Most sessions alive in one sample. */
  maxSessions: number;
  /** Largest sum of every session's PSS in one sample. */
  peakTotalKib: number;
  minAvailableKib: number;
  /** Largest swap in use minus the swap in use at the start. */
  swapGrowthKib: number;
  swapTotalKib: number;
  /** PSS of the watched parent processes themselves (e.g. the sandbox-worker), at their largest. */
  parentPeakKib: number;
  /** Mean milliseconds one sample took (reading /proc of every session process). */
  sampleMs: number;
}

export interface MemoryWatchOptions {
  /** Milliseconds between samples; default SAMPLE_MS (both sides of a comparison should use the same). */
  intervalMs?: number;
  /**
   * Sessions are found under these parents each sample: every child whose command line matches
   * `sessionMatch` (default: any child) is a session root, and its whole tree is the session.
   */
  parents?: () => number[];
  sessionMatch?: RegExp;
  /** Called after each sample with the host's state (to stop a ladder step before the host runs out). */
  onSample?(host: HostMemory, totalKib: number): void;
}

/**
 * Samples the sessions' PSS and the host's memory until stop(). Sessions can also be added by pid.
 * Reads are asynchronous and a sample starts only after the last one ended (at least 4 of its
 * durations later), so the watch never holds up this process's event loop, where the scripted
 * policy server may be answering.
 */
export const SAMPLE_MS = 500;

export class MemoryWatch {
  private readonly sessions = new Map<number, { peak: number; sum: number; samples: number; maxProcs: number }>();
  private readonly roots = new Set<number>();
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private sampleMsSum = 0;
  private sampleCount = 0;
  private readonly swapAtStart: number;
  private maxSessions = 0;
  private peakTotal = 0;
  private minAvailable = Number.POSITIVE_INFINITY;
  private maxSwap = 0;
  private swapTotal = 0;
  private parentPeak = 0;

  constructor(private readonly opts: MemoryWatchOptions = {}) {
    this.swapAtStart = hostMemory().swapUsedKib;
    this.schedule(opts.intervalMs ?? SAMPLE_MS);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      const t = performance.now();
      void this.sample().then(() => {
        const took = performance.now() - t;
        this.sampleMsSum += took;
        this.sampleCount++;
        this.schedule(Math.max(this.opts.intervalMs ?? SAMPLE_MS, 4 * took));
      });
    }, ms);
  }

  /** Watch the tree of `pid` as one session from now on (bare runs). */
  add(pid: number): void {
    this.roots.add(pid);
  }

  private async sample(): Promise<void> {
    const parentPids = this.opts.parents?.() ?? [];
    for (const parent of parentPids) {
      for (const child of await childrenOf(parent)) {
        if (this.roots.has(child)) continue;
        if (!this.opts.sessionMatch || this.opts.sessionMatch.test(await cmdline(child))) this.roots.add(child);
      }
    }
    let total = 0;
    let alive = 0;
    for (const root of this.roots) {
      if (!(await isAlive(root))) {
        this.roots.delete(root);
        continue;
      }
      const pids = await subtree(root);
      const kib = sum(await Promise.all(pids.map(pssKib)));
      if (kib === 0) continue;
      alive++;
      total += kib;
      const s = this.sessions.get(root) ?? { peak: 0, sum: 0, samples: 0, maxProcs: 0 };
      s.peak = Math.max(s.peak, kib);
      s.sum += kib;
      s.samples++;
      s.maxProcs = Math.max(s.maxProcs, pids.length);
      this.sessions.set(root, s);
    }
    this.parentPeak = Math.max(this.parentPeak, sum(await Promise.all(parentPids.map(pssKib))));
    this.maxSessions = Math.max(this.maxSessions, alive);
    this.peakTotal = Math.max(this.peakTotal, total);
    const host = hostMemory();
    this.minAvailable = Math.min(this.minAvailable, host.availableKib);
    this.maxSwap = Math.max(this.maxSwap, host.swapUsedKib);
    this.swapTotal = host.swapTotalKib;
    this.opts.onSample?.(host, total);
  }

  stop(): MemoryReport {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    return {
      // A session seen in fewer than 2 samples was too short to say anything about its memory.
      sessions: [...this.sessions].filter(([, s]) => s.samples >= 2).map(([root, s]) => ({ root, peakKib: s.peak, meanKib: s.sum / s.samples, samples: s.samples, maxProcesses: s.maxProcs })),
      maxSessions: this.maxSessions,
      peakTotalKib: this.peakTotal,
      minAvailableKib: this.minAvailable,
      swapGrowthKib: Math.max(0, this.maxSwap - this.swapAtStart),
      swapTotalKib: this.swapTotal,
      parentPeakKib: this.parentPeak,
      sampleMs: this.sampleCount ? this.sampleMsSum / this.sampleCount : 0,
    };
  }
}
