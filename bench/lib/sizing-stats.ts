/**
 * The arithmetic of benchmark 15 (sizing), apart from any Redis or process so that it can be tested
 * alone: Redis INFO counters and their deltas over a window, one step's figures, the knee (the first
 * step where the rows written per second stop following the rollouts in flight, or the results lag
 * grows), and the Markdown table of the steps.
 */
import { fmt, fmtInt, quantile } from './stats.ts';

/** The INFO counters one window reads, of one Redis node. */
export interface RedisCounters {
  /** used_cpu_sys + used_cpu_user, seconds. */
  cpuS: number;
  /** total_commands_processed. */
  commands: number;
  /** used_memory, bytes. */
  usedMemory: number;
  /** connected_clients. */
  clients: number;
  /** INFO commandstats: calls and microseconds by command (commands inside Lua scripts counted too). */
  commandStats: Record<string, { calls: number; usec: number }>;
}

/** `INFO` text as a map of its `field:value` lines. */
export function parseInfo(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out.set(line.slice(0, i), line.slice(i + 1).trim());
  }
  return out;
}

/** The counters of one node from the text of `INFO` (all sections, or at least cpu, stats, memory and clients). */
export function countersOf(info: string): RedisCounters {
  const f = parseInfo(info);
  const num = (key: string) => {
    const v = Number(f.get(key));
    if (!Number.isFinite(v)) throw new Error(`INFO has no numeric ${key}`);
    return v;
  };
  const commandStats: RedisCounters['commandStats'] = {};
  for (const [key, value] of f) {
    const m = /^cmdstat_(.+)$/.exec(key);
    const calls = /calls=(\d+)/.exec(value);
    const usec = /usec=(\d+)/.exec(value);
    if (m && calls && usec) commandStats[m[1]] = { calls: Number(calls[1]), usec: Number(usec[1]) };
  }
  return { cpuS: num('used_cpu_sys') + num('used_cpu_user'), commands: num('total_commands_processed'), usedMemory: num('used_memory'), clients: num('connected_clients'), commandStats };
}

/**
 * The commands that took most of Redis's time between two readings, as `name ms/s (calls/s)`: the
 * milliseconds per second spent inside the command (commandstats usec: wall time, so on a busy host
 * it includes time Redis waited for a core); a script's time is its `evalsha`, and the commands it
 * runs are listed too (their time is within it).
 */
export function topCommands(before: RedisCounters, after: RedisCounters, seconds: number, count = 4): string {
  const deltas = Object.entries(after.commandStats).map(([name, a]) => {
    const b = before.commandStats[name] ?? { calls: 0, usec: 0 };
    return { name, calls: a.calls - b.calls, usec: a.usec - b.usec };
  }).filter((d) => d.calls > 0);
  return deltas.sort((x, y) => y.usec - x.usec).slice(0, count)
    .map((d) => `${d.name} ${fmt(d.usec / 1000 / seconds, 1)} ms/s (${fmtInt(d.calls / seconds)}/s)`).join(', ');
}

/** What one node did over a window of `seconds`: CPU as a share of one core, commands per second. */
export function nodeRates(before: RedisCounters, after: RedisCounters, seconds: number): { cpu: number; commandsPerS: number } {
  if (!(seconds > 0)) throw new Error(`a window of ${seconds} s`);
  return { cpu: (after.cpuS - before.cpuS) / seconds, commandsPerS: (after.commands - before.commands) / seconds };
}

/** The mean of a lognormal whose median is `median`: median x exp(sigma^2 / 2); and back. */
export const lognormalMean = (median: number, sigma: number): number => median * Math.exp((sigma * sigma) / 2);
export const lognormalMedian = (mean: number, sigma: number): number => mean / Math.exp((sigma * sigma) / 2);

/** One step of the ladder, measured. */
export interface SizingStep {
  /** Rollouts in flight asked for (pods x slots). */
  target: number;
  /** Rollouts in flight on average over the window (active jobs of the rollout queue, sampled). */
  inFlight: number;
  /** Sandbox-worker "pods" (each a connection and a BullMQ worker of `slots`). */
  pods: number;
  windowS: number;
  /** Rows the results consumer committed in the window, per second. */
  rowsPerS: number;
  /** Rows per second the rollouts held in flight should give: in flight (as held) / mean rollout duration (Little's law). */
  expectedRowsPerS: number;
  /** Row built (judge done) -> row written, ms: median and 95th percentile over the window's rows. */
  lagP50Ms: number;
  lagP95Ms: number;
  /** Per Redis node: its CPU as a share of one core and its commands per second. */
  nodes: Array<{ name: string; cpu: number; commandsPerS: number }>;
  /** used_memory over every node, mean over the window, less the baseline before any pod, per rollout in flight. */
  memoryPerRolloutB: number;
  /** connected_clients over every node at the end of the window. */
  clients: number;
  /** Where the busiest node spent its time (topCommands). */
  topCommands: string;
  /** Cores of the host busy over the window (/proc/stat), and how many it has. */
  hostBusy: number;
  hostCores: number;
  /** BullMQ's lock-extension calls (the extendLocks script) and the job locks they renewed, per second. */
  renewCallsPerS: number;
  locksRenewedPerS: number;
}

/** Row built -> written lags of a window: median and 95th percentile (NaN without rows). */
export function lagQuantiles(lagsMs: readonly number[]): { p50: number; p95: number } {
  return { p50: quantile(lagsMs, 0.5), p95: quantile(lagsMs, 0.95) };
}

export interface KneeRule {
  /** rows/s below this share of the expected rows/s: the step does not scale. Default 0.9. */
  minEfficiency: number;
  /** The lag's 95th percentile above this multiple of the first step's, and above `lagFloorMs`: the lag grows. Default 2. */
  lagFactor: number;
  /** Lags below this are never a knee (timer and poll noise). Default 1000 ms. */
  lagFloorMs: number;
}

export const DEFAULT_KNEE: KneeRule = { minEfficiency: 0.9, lagFactor: 2, lagFloorMs: 1000 };

/** Why `step` is past the knee (null: it is not), against the first step of the ladder. */
export function kneeReason(step: SizingStep, first: SizingStep, rule: KneeRule = DEFAULT_KNEE): string | null {
  const eff = step.rowsPerS / step.expectedRowsPerS;
  if (!(eff >= rule.minEfficiency)) return `rows/s ${fmt(step.rowsPerS, 1)} is ${fmt(eff * 100, 0)}% of the ${fmt(step.expectedRowsPerS, 1)} the rollouts in flight should give (below ${fmt(rule.minEfficiency * 100, 0)}%)`;
  const lagBound = Math.max(rule.lagFloorMs, rule.lagFactor * first.lagP95Ms);
  if (step.lagP95Ms > lagBound) return `results lag p95 ${fmtInt(step.lagP95Ms)} ms, above ${fmtInt(lagBound)} ms (${rule.lagFactor} x the first step's ${fmtInt(first.lagP95Ms)} ms, at least ${fmtInt(rule.lagFloorMs)} ms)`;
  return null;
}

/**
 * The first step past the knee, with why; null when every step scaled. A step whose host was busy on
 * 90 % or more of its cores says so: the benchmark's own processes (pods, judge, writer) were short
 * of CPU there, so the knee may be the host's, not Redis's.
 */
export function findKnee(steps: readonly SizingStep[], rule: KneeRule = DEFAULT_KNEE): { index: number; target: number; reason: string; hostBound: boolean } | null {
  for (let i = 0; i < steps.length; i++) {
    const reason = kneeReason(steps[i], steps[0], rule);
    if (!reason) continue;
    const s = steps[i];
    const hostBound = s.hostBusy >= 0.9 * s.hostCores;
    const why = hostBound ? `${reason}; the host was busy on ${fmt(s.hostBusy, 2)} of its ${s.hostCores} cores there, so this may be the host's knee, not Redis's` : reason;
    return { index: i, target: s.target, reason: why, hostBound };
  }
  return null;
}

/** The busiest node's share of one core, and the sum over nodes. */
export function cpuOf(step: SizingStep): { max: number; sum: number; busiest: string } {
  const busiest = step.nodes.reduce((a, n) => (n.cpu > a.cpu ? n : a), step.nodes[0]);
  return { max: busiest.cpu, sum: step.nodes.reduce((a, n) => a + n.cpu, 0), busiest: busiest.name };
}

/** The steps of one topology as a Markdown table (for bench/RESULTS.md). */
export function sizingTable(steps: readonly SizingStep[]): string {
  const lines = [
    '| in flight (asked / held) | pods | rows/s (expected) | lag p50 / p95 | Redis CPU (busiest node; all nodes) | commands/s | memory per rollout | lock renewals/s (calls / locks) | clients | host busy |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const s of steps) {
    const cpu = cpuOf(s);
    const cmds = s.nodes.reduce((a, n) => a + n.commandsPerS, 0);
    lines.push(
      `| ${fmtInt(s.target)} / ${fmtInt(s.inFlight)} | ${fmtInt(s.pods)} | ${fmt(s.rowsPerS, 1)} (${fmt(s.expectedRowsPerS, 1)}) | ${fmtInt(s.lagP50Ms)} / ${fmtInt(s.lagP95Ms)} ms | ` +
        `${fmt(cpu.max * 100, 0)}%${s.nodes.length > 1 ? `; ${fmt(cpu.sum * 100, 0)}%` : ''} | ${fmtInt(cmds)} | ${fmtInt(s.memoryPerRolloutB)} B | ${fmt(s.renewCallsPerS, 1)} / ${fmt(s.locksRenewedPerS, 0)} | ${fmtInt(s.clients)} | ${fmt(s.hostBusy, 2)} of ${s.hostCores} cores |`,
    );
  }
  return lines.join('\n');
}
