/** The statistics of the metrics: the exact bootstrap interval of a mean of 0/1 rewards, and pass@k. Pure. */

const round = (x: number): number => Math.round(x * 1e6) / 1e6;

/**
 * The 95% percentile-bootstrap interval of the mean of 0/1 rewards. Resampling n rewards of which a
 * fraction p is 1 gives a mean distributed as Binomial(n, p) / n, so the interval is read off that
 * distribution exactly (as if with infinitely many resamples), in O(n) and with no randomness.
 */
export function bootstrapCi95(values: readonly number[]): [number, number] | null {
  if (values.length === 0) return null;
  if (values.some((v) => v !== 0 && v !== 1)) throw new Error('bootstrapCi95 takes 0/1 rewards');
  return binomialCi95(values.length, values.filter((v) => v === 1).length);
}

export function binomialCi95(n: number, ones: number): [number, number] | null {
  if (n === 0) return null;
  const p = ones / n;
  if (p === 0 || p === 1) return [p, p];
  const [lo, hi] = [0.025, 0.975];
  let logC = 0;
  let cdf = 0;
  let kLo = -1;
  for (let k = 0; k <= n; k++) {
    if (k > 0) logC += Math.log((n - k + 1) / k);
    cdf += Math.exp(logC + k * Math.log(p) + (n - k) * Math.log(1 - p));
    if (kLo < 0 && cdf >= lo) kLo = k;
    if (cdf >= hi) return [round(kLo / n)!, round(k / n)!];
  }
  return [round(kLo / n)!, 1];
}

/** Unbiased pass@k for one task with n scored attempts of which c are correct. */
export function passAtK(n: number, c: number, k: number): number {
  if (n - c < k) return 1;
  let ratioLeft = 1;
  for (let i = 0; i < k; i++) ratioLeft *= (n - c - i) / (n - i);
  return 1 - ratioLeft;
}
