/**
 * The statistics of a paired comparison of two runs over the same tasks. Pure and deterministic.
 *
 * - `pairedBootstrapCi95`: the 95% percentile-bootstrap interval of the mean per-task difference,
 *   resampling tasks. It is read exactly off the distribution of the resampled mean (the n-fold
 *   convolution of the differences' empirical distribution), as if with infinitely many resamples,
 *   so it needs no seed; with very many distinct differences it falls back to 20,000 seeded resamples.
 * - `exactBinomialP`: the two-sided exact binomial test at 1/2 (McNemar's exact test on the flips;
 *   the sign test on the signs of per-task differences).
 */

const round = (x: number): number => Math.round(x * 1e6) / 1e6;

/** Sums are kept on a lattice of this resolution, so equal sums reached by different paths meet. */
const KEY = 1e9;
/** Most distinct sums the exact convolution keeps before it falls back to resampling. */
const MAX_STATES = 60_000;
const RESAMPLES = 20_000;

/** Lower and upper 2.5% / 97.5% percentiles of a distribution given as sorted (value, probability) pairs. */
function percentiles(dist: Array<[number, number]>): [number, number] {
  let cdf = 0;
  let lo: number | null = null;
  for (const [v, p] of dist) {
    cdf += p;
    if (lo === null && cdf >= 0.025 - 1e-12) lo = v;
    if (cdf >= 0.975 - 1e-12) return [lo ?? v, v];
  }
  const last = dist[dist.length - 1][0];
  return [lo ?? last, last];
}

/** The exact distribution of the sum of n draws with replacement from `values`; null when it grows too wide. */
function sumDistribution(values: readonly number[]): Map<number, number> | null {
  const n = values.length;
  const step = new Map<number, number>();
  for (const v of values) step.set(Math.round(v * KEY), (step.get(Math.round(v * KEY)) ?? 0) + 1 / n);
  let dist = new Map<number, number>([[0, 1]]);
  for (let i = 0; i < n; i++) {
    const next = new Map<number, number>();
    for (const [s, p] of dist) for (const [v, q] of step) next.set(s + v, (next.get(s + v) ?? 0) + p * q);
    if (next.size > MAX_STATES) return null;
    dist = next;
  }
  return dist;
}

/** A small seeded generator (mulberry32): the same seed gives the same resamples. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function resampledCi95(values: readonly number[], seed: number): [number, number] {
  const n = values.length;
  const random = seededRandom(seed);
  const means: number[] = [];
  for (let r = 0; r < RESAMPLES; r++) {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += values[Math.floor(random() * n)];
    means.push(sum / n);
  }
  means.sort((a, b) => a - b);
  return percentiles(means.map((m) => [m, 1 / RESAMPLES]));
}

/** The 95% paired-bootstrap interval of the mean of per-task differences (B − A); null with no pairs. */
export function pairedBootstrapCi95(differences: readonly number[], seed = 1): [number, number] | null {
  const n = differences.length;
  if (n === 0) return null;
  const dist = sumDistribution(differences);
  if (!dist) {
    const [lo, hi] = resampledCi95(differences, seed);
    return [round(lo), round(hi)];
  }
  const sorted = [...dist.entries()].sort(([a], [b]) => a - b).map(([s, p]): [number, number] => [s / KEY / n, p]);
  const [lo, hi] = percentiles(sorted);
  return [round(lo), round(hi)];
}

/** log of n choose k. */
function logChoose(n: number, k: number): number {
  let s = 0;
  for (let i = 1; i <= k; i++) s += Math.log((n - k + i) / i);
  return s;
}

/**
 * Two-sided exact binomial p at 1/2 for `b` successes against `c` (twice the smaller tail, at most 1):
 * McNemar's exact test when b and c are the flips each way. 1 when b + c = 0.
 */
export function exactBinomialP(b: number, c: number): number {
  const n = b + c;
  if (n === 0) return 1;
  const k = Math.min(b, c);
  let tail = 0;
  for (let i = 0; i <= k; i++) tail += Math.exp(logChoose(n, i) - n * Math.LN2);
  return round(Math.min(1, 2 * tail));
}
