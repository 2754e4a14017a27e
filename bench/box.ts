/**
 * Benchmark 6, the cost of the box: one sandbox's start as the worker pays it per rollout (create,
 * a first trivial command, destroy) with the limits (cgroup, tmpfs disk, seccomp, rlimits entry)
 * against the same `local` provider without them, alternating sides after one untimed warm-up of
 * each; medians. The one-time check at worker start (probe) is reported apart.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { unenforced } from '../src/workers/sandbox/sandboxes/box-report.ts';
import { DEFAULT_RESOURCES, LocalBwrapProvider } from '../src/workers/sandbox/sandboxes/local/provider.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, median } from './lib/stats.ts';

export interface BoxBenchOptions {
  dir: string;
  /** Timed sandbox starts of each side. Default 15. */
  runs: number;
  log?: (line: string) => void;
}

/** Milliseconds of create + `true` + destroy. */
async function sandboxStart(provider: LocalBwrapProvider, n: number): Promise<number> {
  const t = performance.now();
  const sb = await provider.create({ label: `bench-box-${n}`, gateway: { port: 1 } });
  const r = await sb.exec(['true']);
  await sb.destroy();
  if (r.exitCode !== 0) throw new Error(`the first command of sandbox ${n} failed: ${r.stderr}`);
  return performance.now() - t;
}

export async function benchBox(opts: BoxBenchOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const dir = mkdtempSync(path.join(opts.dir, 'box-'));
  const boxed = new LocalBwrapProvider({ workdir: '/workspace', rootDir: path.join(dir, 'boxed'), resources: DEFAULT_RESOURCES });
  const bare = new LocalBwrapProvider({ workdir: '/workspace', rootDir: path.join(dir, 'bare'), box: false });
  try {
    const t = performance.now();
    const report = await boxed.probe();
    const probeMs = performance.now() - t;
    const missing = unenforced(report);
    await sandboxStart(boxed, 0);
    await sandboxStart(bare, 0);
    const [withBox, without]: [number[], number[]] = [[], []];
    for (let n = 1; n <= opts.runs; n++) {
      // Alternate which side goes first, so neither always runs on a warmer machine.
      if (n % 2) withBox.push(await sandboxStart(boxed, n)), without.push(await sandboxStart(bare, n));
      else without.push(await sandboxStart(bare, n)), withBox.push(await sandboxStart(boxed, n));
    }
    const [mb, mw] = [median(withBox), median(without)];
    log(`  sandbox start: with the box ${fmt(mb, 1)} ms, without ${fmt(mw, 1)} ms (medians of ${opts.runs})`);
    return [{
      bench: '6 box', metric: 'sandbox start with limits / without (create + `true` + destroy)', value: fmt(mb / mw),
      note: `medians of ${opts.runs} each: ${fmt(mb, 1)} ms vs ${fmt(mw, 1)} ms; one-time check at worker start ${fmt(probeMs, 0)} ms; ` +
        (missing.length ? `NOT enforced here: ${missing.map((m) => m.split(' ')[0]).join(', ')}` : 'cgroup, tmpfs disk, seccomp and rlimits all enforced'),
    }];
  } finally {
    await boxed.close();
    await bare.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
