/**
 * Benchmark 4, the real agent: the per-task time of the whole harness (`createOpenCodeRunner` with
 * the `local` bubblewrap provider: gateway up, sandbox up, files in, OpenCode session, the outcome,
 * transcript, teardown) against `opencode run` alone, on the host, with the same argv, environment
 * and seed files the runner uses, in a temp HOME, prompt on stdin. Both talk to the same scripted
 * policy server, which answers `\boxed{A}` at once. Runs alternate between the two sides after one
 * untimed warm-up run; medians are reported.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startScriptedPolicyServer } from '../src/demo/scripted-policy-server.ts';
import { scripts } from '../src/demo/scripted-policy-scripts.ts';
import { bareRun, harnessRun, MODEL, type Phases } from './lib/opencode-session.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, median } from './lib/stats.ts';

export interface RealAgentOptions {
  dir: string;
  /** Timed runs of each side. Default 3. */
  runs: number;
  log?: (line: string) => void;
}

export async function benchRealAgent(opts: RealAgentOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const dir = mkdtempSync(path.join(opts.dir, 'agent-'));
  const server = await startScriptedPolicyServer({ script: scripts.answer('\\boxed{A}'), modelName: MODEL });
  try {
    // One untimed run loads the binary into the page cache for both sides.
    await bareRun(server, dir, '0');
    const bare: number[] = [];
    const harness: number[] = [];
    const phases: Phases[] = [];
    for (let n = 1; n <= opts.runs; n++) {
      bare.push((await bareRun(server, dir, String(n))).seconds);
      const h = await harnessRun(server, dir, `bench-harness-${n}`);
      harness.push(h.seconds);
      phases.push(h.phases);
      log(`  run ${n}: opencode alone ${fmt(bare[bare.length - 1])} s, whole harness ${fmt(h.seconds)} s`);
    }
    const [mb, mh] = [median(bare), median(harness)];
    const breakdown = Object.keys(phases[0]).map((k) => `${k} ${fmt(median(phases.map((p) => p[k] ?? 0)))} s`).join(', ');
    return [
      {
        bench: '4 real agent', metric: 'whole harness / `opencode run` alone, per task', value: fmt(mh / mb),
        note: `medians of ${opts.runs} runs each: ${fmt(mh)} s vs ${fmt(mb)} s (harness ${harness.map((x) => fmt(x)).join(', ')}; alone ${bare.map((x) => fmt(x)).join(', ')}); policy answers at once`,
      },
      { bench: '4 real agent', metric: 'fixed cost of the harness per task', value: `${fmt(mh - mb)} s`, note: `harness phases (medians): ${breakdown}` },
    ];
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
