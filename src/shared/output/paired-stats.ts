/**
 * The statistics of a paired comparison of two runs over the same tasks. Pure and deterministic.
 *
 * - `pairedBootstrapCi95`: the 95% percentile-bootstrap interval of the mean per-task difference,
 *   resampling tasks. It is read exactly off the distribution of the resampled mean (the n-fold
 *   convolution of the differences' empirical distribution), as if with infinitely many resamples,
 *   so it needs no seed; when that is too much work (many repeats with uneven masked rows make a
 *   fine lattice) it takes the percentiles of 20,000 seeded resamples instead.
 * - `exactBinomialP`: the two-sided exact binomial test at 1/2 (McNemar's exact test on the flips;
 *   the sign test on the signs of per-task differences).
 */

const round = (x: number): number => Math.round(x * 1e6) / 1e6;

/** Most work (draws x sums x distinct values) the exact convolution may take before the interval is resampled instead. */
const MAX_WORK = 5e7;
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

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** The smallest q <= 5040 that makes `v * q` whole (a per-task score is a fraction of at most a few repeats); null if none. */
function denominator(v: number): number | null {
  for (let q = 1; q <= 5040; q++) if (Math.abs(v * q - Math.round(v * q)) < 1e-9) return q;
  return null;
}

/**
 * The exact distribution of the mean of n draws with replacement from `values`, as sorted (mean,
 * probability) pairs: the values are put on their common lattice (1/L), and the n-fold convolution of
 * their empirical distribution is computed over whole numbers. Null when that is too much work.
 */
function meanDistribution(values: readonly number[]): Array<[number, number]> | null {
  const n = values.length;
  let lattice = 1;
  for (const v of values) {
    const q = denominator(v);
    if (q === null) return null;
    lattice = (lattice * q) / gcd(lattice, q);
    if (lattice > 5040) return null;
  }
  const ints = values.map((v) => Math.round(v * lattice));
  const lo = Math.min(...ints);
  const width = Math.max(...ints) - lo;
  const step = new Map<number, number>();
  for (const k of ints) step.set(k - lo, (step.get(k - lo) ?? 0) + 1 / n);
  if ((n * n * Math.max(width, 1) * step.size) / 2 > MAX_WORK) return null;
  const offsets = [...step.entries()];
  let dist = new Float64Array(n * width + 1);
  let next = new Float64Array(n * width + 1);
  dist[0] = 1;
  for (let i = 0; i < n; i++) {
    next.fill(0, 0, (i + 1) * width + 1);
    for (let sum = 0; sum <= i * width; sum++) {
      const p = dist[sum];
      if (p === 0) continue;
      for (const [off, q] of offsets) next[sum + off] += p * q;
    }
    [dist, next] = [next, dist];
  }
  const out: Array<[number, number]> = [];
  for (let sum = 0; sum <= n * width; sum++) if (dist[sum] > 0) out.push([(sum + n * lo) / (lattice * n), dist[sum]]);
  return out;
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
  const dist = meanDistribution(differences);
  const [lo, hi] = dist ? percentiles(dist) : resampledCi95(differences, seed);
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
  // Six significant digits, never rounded to 0: a tiny p stays a (tiny) number.
  return Number(Math.min(1, 2 * tail).toPrecision(6));
}
