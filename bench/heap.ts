/**
 * Benchmark 8, runtime heap: the memory/speed curve of OpenCode's JavaScript runtime (Bun 1.3.14,
 * JavaScriptCore) over the settings that bound its heap. Whole-harness rollouts in the box (one bash
 * tool call, then the answer; policy answers at once), one at a time, the settings taken in turn
 * round after round; per setting the median rollout time and the median of each session's peak and
 * mean PSS, each divided by the same figure with nothing set.
 *
 * Settings: `unset`; a number N: `BUN_JSC_forceRAMSize` = N MiB (what `agent.runtime_heap_mib` sets,
 * JSC sizes its heap from the RAM it believes it has); `smol`: the compiled OpenCode binary ignores
 * `BUN_OPTIONS` (tested: `--preload`, `--cpu-prof` and `--inspect-wait` given that way do nothing,
 * while the same binary as Bun, `BUN_BE_BUN=1`, honours them) and passes `--smol` on its command line
 * to its own CLI, so the nearest is what `--smol` changes in JSC: Bun creates the VM with
 * `HeapType::Small`, whose minimum heap is `smallHeapSize` instead of `largeHeapSize`; `smol` here
 * sets `BUN_JSC_largeHeapSize=1048576` (JSC's `smallHeapSize` default) to the same effect.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startScriptedPolicyServer } from '../src/demo/scripted-policy-server.ts';
import { scripts } from '../src/demo/scripted-policy-scripts.ts';
import { MemoryWatch } from './lib/memory.ts';
import { harnessRun, MODEL } from './lib/opencode-session.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, fmtInt, median } from './lib/stats.ts';

export interface HeapOptions {
  dir: string;
  /** e.g. unset,2048,1024,512,256,smol */
  settings: string[];
  /** Rollouts per setting. Default 3. */
  runs: number;
  log?: (line: string) => void;
}

/** What each setting adds to OpenCode's environment. */
export function heapEnv(setting: string): Record<string, string> {
  if (setting === 'unset') return {};
  if (setting === 'smol') return { BUN_JSC_largeHeapSize: String(1024 * 1024) };
  const mib = Number(setting);
  if (!Number.isInteger(mib) || mib <= 0) throw new Error(`--heap-settings: "${setting}" is not unset, smol or a size in MiB`);
  return { BUN_JSC_forceRAMSize: String(mib * 1024 * 1024) };
}

const label = (s: string) => (s === 'unset' ? 'nothing set' : s === 'smol' ? 'smol (`BUN_JSC_largeHeapSize=1 MiB`)' : `\`BUN_JSC_forceRAMSize\` ${s} MiB`);

interface Sample {
  seconds: number;
  peakKib: number;
  meanKib: number;
}

export async function benchHeap(opts: HeapOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const settings = opts.settings.includes('unset') ? opts.settings : ['unset', ...opts.settings];
  for (const s of settings) heapEnv(s);
  const dir = mkdtempSync(path.join(opts.dir, 'heap-'));
  const server = await startScriptedPolicyServer({ script: scripts.pythonThenAnswer('A'), modelName: MODEL });
  const samples = new Map<string, Sample[]>(settings.map((s) => [s, []]));
  try {
    await harnessRun(server, dir, 'bench-heap-warm');
    for (let round = 1; round <= opts.runs; round++) {
      // Each round in another order, so no setting always runs first on a warmer machine.
      const order = settings.map((_, i) => settings[(i + round - 1) % settings.length]);
      for (const setting of order) {
        const watch = new MemoryWatch({ parents: () => [process.pid], sessionMatch: /bwrap/ });
        const h = await harnessRun(server, dir, `bench-heap-${setting}-${round}`, { extraEnv: heapEnv(setting) }).finally(() => watch.stop());
        const memory = watch.stop();
        const s = memory.sessions.sort((a, b) => b.peakKib - a.peakKib)[0];
        if (!s) throw new Error(`no memory samples of the ${setting} rollout`);
        samples.get(setting)!.push({ seconds: h.seconds, peakKib: s.peakKib, meanKib: s.meanKib });
        log(`  round ${round} ${setting}: ${fmt(h.seconds)} s, PSS peak ${fmtInt(s.peakKib / 1024)} MiB, mean ${fmtInt(s.meanKib / 1024)} MiB`);
      }
    }
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const stat = (s: string) => {
    const xs = samples.get(s)!;
    return { t: median(xs.map((x) => x.seconds)), peak: median(xs.map((x) => x.peakKib)) / 1024, mean: median(xs.map((x) => x.meanKib)) / 1024, xs };
  };
  const base = stat('unset');
  const rows: BenchRow[] = [];
  const fits: string[] = [];
  for (const s of settings) {
    const x = stat(s);
    const [time, peak, mean] = [x.t / base.t, x.peak / base.peak, x.mean / base.mean];
    if (s !== 'unset' && time <= 1.03 && peak <= 0.9) fits.push(s);
    rows.push({
      bench: '8 runtime heap', metric: `${label(s)}: rollout time / nothing set, PSS peak / nothing set`, value: `${fmt(time)} / ${fmt(peak)}`,
      note: `medians of ${x.xs.length}: ${fmt(x.t)} s (${x.xs.map((y) => fmt(y.seconds)).join(', ')}), PSS peak ${fmtInt(x.peak)} MiB, mean ${fmtInt(x.mean)} MiB (mean / nothing set ${fmt(mean)})`,
    });
  }
  rows.push({
    bench: '8 runtime heap', metric: 'a setting that costs <= 3% time for >= 10% less peak PSS', value: fits.length ? fits.join(', ') : 'none',
    note: fits.length ? `agent.runtime_heap_mib could default to ${fits.filter((f) => f !== 'smol').at(-1) ?? fits[0]}` : 'agent.runtime_heap_mib stays unset by default',
  });
  return rows;
}
