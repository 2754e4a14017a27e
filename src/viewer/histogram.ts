/** Histograms for the run page: equal-width bins on a "nice" step (1, 2 or 5 times a power of ten). */

export interface HistogramBin {
  /** Inclusive lower edge. */
  lo: number;
  /** Exclusive upper edge (the last bin also holds its upper edge). */
  hi: number;
  count: number;
}

export interface Histogram {
  bins: HistogramBin[];
  /** Values counted (every value is in exactly one bin). */
  total: number;
  /** Whole-number data: one bin per value while the range is small, integer edges always. */
  integer: boolean;
}

/** The smallest of 1, 2, 5 x 10^k that is >= `raw`. */
export function niceStep(raw: number): number {
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw - 1e-12 * power) return m * power;
  return 10 * power;
}

/**
 * Bin `values` into at most about `maxBins` bins starting at the floor of the smallest value (0 for
 * non-negative real data). With `integer`, each bin covers a whole number of values.
 */
export function histogram(values: readonly number[], opts: { integer: boolean; maxBins?: number }): Histogram {
  const maxBins = opts.maxBins ?? 20;
  if (values.length === 0) return { bins: [], total: 0, integer: opts.integer };
  // A loop, not Math.min(...values): a run of 100k rollouts would overflow the argument list.
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const start = opts.integer ? Math.floor(min) : Math.min(0, Math.floor(min));
  const span = opts.integer ? max - start + 1 : max - start;
  let step = niceStep(span / maxBins);
  if (opts.integer) step = Math.max(1, Math.ceil(step));
  const n = Math.max(1, Math.ceil(span / step));
  const bins: HistogramBin[] = Array.from({ length: n }, (_, i) => ({ lo: start + i * step, hi: start + (i + 1) * step, count: 0 }));
  for (const v of values) bins[Math.min(n - 1, Math.floor((v - start) / step))].count++;
  return { bins, total: values.length, integer: opts.integer };
}
