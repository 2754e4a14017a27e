/** Small numeric helpers of the benchmarks: quantiles, a seeded generator, long-tailed samples. */

/** The q-quantile (0..1) of `values` by linear interpolation; NaN for an empty list. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo);
}

export const median = (values: readonly number[]): number => quantile(values, 0.5);

import { seededRandom } from '../../src/shared/output/paired-stats.ts';

export { seededRandom };

/** `count` lognormal samples with the given median and sigma (of the underlying normal), seeded. */
export function lognormalSamples(count: number, medianValue: number, sigma: number, seed: number): number[] {
  const rand = seededRandom(seed);
  const out: number[] = [];
  while (out.length < count) {
    // Box-Muller: two independent standard normals per pair of uniforms.
    const u1 = Math.max(rand(), 1e-12);
    const u2 = rand();
    const r = Math.sqrt(-2 * Math.log(u1));
    for (const z of [r * Math.cos(2 * Math.PI * u2), r * Math.sin(2 * Math.PI * u2)]) {
      if (out.length < count) out.push(medianValue * Math.exp(sigma * z));
    }
  }
  return out;
}

/**
 * Makespan of greedy list scheduling: jobs taken in order, each by the first slot to free up. This
 * is what a FIFO queue with `slots` workers achieves at best, with zero dispatch overhead.
 */
export function listScheduleMakespan(durations: readonly number[], slots: number): number {
  const free = new Array<number>(slots).fill(0);
  for (const d of durations) {
    let k = 0;
    for (let i = 1; i < slots; i++) if (free[i] < free[k]) k = i;
    free[k] += d;
  }
  return Math.max(...free);
}

export function fmt(x: number, digits = 2): string {
  if (!Number.isFinite(x)) return 'n/a';
  return x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function fmtInt(x: number): string {
  return Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : 'n/a';
}

export function mib(bytes: number): string {
  return `${fmt(bytes / 1048576, 1)} MiB`;
}
