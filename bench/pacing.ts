/**
 * Benchmark 11, pacing a limited policy server: a `vcfleet worker sandbox` process (the real
 * OpenCode in `local` sandboxes, `--concurrency` sessions at once) against two scripted servers
 * that limit their callers (src/demo/scripted-policy-limits.ts), with the default settings and with
 * `++policy.adaptive_concurrency=false`, one wave of rollouts of two calls each per side:
 *
 *   rate-limited      a token bucket of 1 call per 10 s holding 2, answering 429 + `Retry-After: 1` past it
 *   capacity-limited  1 call at full speed (8 s); beyond that each call slows in proportion
 *                     (latency = 8 s x calls in flight), like a saturated vLLM server
 *
 * Both allow fewer calls than the sessions would make unpaced (about 0.2 calls/s at 4 sessions on 2
 * cores), so the endpoint, not OpenCode, is what limits the wave.
 *
 * Figures: the share of calls answered 429, sessions restarted (first calls answered beyond one
 * per rollout; goal 0), rows masked (goal 0), and throughput as a share of what the endpoint allows
 * (answered calls per second from the first call to the last, over the server's rate; goal >= 0.9).
 */
import { performance } from 'node:perf_hooks';
import { startScriptedPolicyServer, type Script } from '../src/demo/scripted-policy-server.ts';
import { capacityLimited, emptyLimitCounts, rateLimited, type LimitCounts } from '../src/demo/scripted-policy-limits.ts';
import { toolResults } from '../src/demo/scripted-policy-scripts.ts';
import { Fleet } from './lib/fleet-wave.ts';
import { MODEL } from './lib/opencode-session.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt } from './lib/stats.ts';

export interface PacingBenchOptions {
  redisUrl: string;
  dir: string;
  /** Rollouts per side. Default 6. */
  rollouts: number;
  /** Sessions at once of the worker. Default 4. */
  concurrency: number;
  log?: (line: string) => void;
}

interface Side {
  counts: LimitCounts;
  firsts: number;
  masked: number;
  rows: number;
  /** Answered calls per second, from the first call the server got to the last it answered. */
  answeredPerS: number;
  makespanS: number;
}

/** Two calls a rollout (a tool call, then an answer); counts first calls answered and when each call was answered. */
function twoCalls(state: { firsts: number; answeredAt: number[] }): Script {
  return (body) => {
    state.answeredAt.push(performance.now());
    if (toolResults(body) === 0) {
      state.firsts++;
      return { kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: 'echo looked', description: 'look' } }] };
    }
    return { kind: 'text', text: 'It is \\boxed{A}.' };
  };
}

async function side(o: PacingBenchOptions, limit: (inner: Script, counts: LimitCounts) => Script, overrides: string[], tag: string): Promise<Side> {
  const counts = emptyLimitCounts();
  const state = { firsts: 0, answeredAt: [] as number[] };
  const firstAt: number[] = [];
  const limited = limit(twoCalls(state), counts);
  const server = await startScriptedPolicyServer({ modelName: MODEL, script: (body, i, ctx) => (firstAt.push(performance.now()), limited(body, i, ctx)) });
  const fleet = new Fleet({ redisUrl: o.redisUrl, dir: o.dir, policyUrl: server.url, concurrency: o.concurrency, overrides: ['++task_timeout_s=600', ...overrides] });
  try {
    await fleet.start();
    const wave = await fleet.wave(o.rollouts, tag);
    if (wave.stopped) throw new Error(`the ${tag} wave stopped: ${wave.stopped}`);
    const spanS = ((state.answeredAt.at(-1) ?? 0) - (firstAt[0] ?? 0)) / 1000;
    return {
      counts, firsts: state.firsts, masked: wave.rows.filter((r) => r.failure_kind !== null).length, rows: wave.rows.length,
      answeredPerS: spanS > 0 ? state.answeredAt.length / spanS : 0, makespanS: wave.makespanS,
    };
  } finally {
    await fleet.close();
    await server.close();
  }
}

function rowsOf(name: string, allowedPerS: number, s: Side, rollouts: number, setting: string): BenchRow[] {
  const bench = `11 pacing: ${name}, ${setting}`;
  const share = s.counts.calls ? s.counts.limited / s.counts.calls : 0;
  const through = s.answeredPerS / allowedPerS;
  const restarted = Math.max(0, s.firsts - rollouts);
  return [
    { bench, metric: 'calls answered 429', value: fmt(share), note: `${s.counts.limited} of ${s.counts.calls} calls` },
    { bench, metric: 'sessions restarted', value: String(restarted), target: '0', ok: restarted === 0, note: `${s.firsts} first calls answered for ${rollouts} rollouts` },
    { bench, metric: 'rows masked', value: String(s.masked), target: '0', ok: s.masked === 0, note: `${s.rows} rows; wave makespan ${fmt(s.makespanS, 0)} s` },
    {
      bench, metric: 'throughput / what the endpoint allows', value: fmt(through), target: '>= 0.9', ok: through >= 0.9,
      note: `${fmt(s.answeredPerS)} answered calls/s from the first call to the last; the endpoint allows ${fmt(allowedPerS)}/s${s.counts.peakInFlight ? `; peak ${s.counts.peakInFlight} calls at once` : ''}`,
    },
  ];
}

export async function benchPacing(o: PacingBenchOptions): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const settings: Array<[string, string[]]> = [['default', []], ['adaptation off', ['++policy.adaptive_concurrency=false']]];
  for (const [setting, overrides] of settings) {
    o.log?.(`[bench 11] rate-limited, ${setting}`);
    const rate = await side(o, (inner, c) => rateLimited(inner, { perS: 0.1, burst: 2, retryAfterS: 1 }, c), overrides, `rate-${setting === 'default' ? 'd' : 'o'}`);
    rows.push(...rowsOf('rate-limited (1 call per 10 s, burst 2)', 0.1, rate, o.rollouts, setting));
    o.log?.(`[bench 11] capacity-limited, ${setting}`);
    const cap = await side(o, (inner, c) => capacityLimited(inner, { capacity: 1, baseMs: 8000 }, c), overrides, `cap-${setting === 'default' ? 'd' : 'o'}`);
    rows.push(...rowsOf('capacity-limited (1 at 8 s)', 1 / 8, cap, o.rollouts, setting));
  }
  return rows;
}
