/**
 * Aggregate metrics of a run, from its rows. Pure: the same rows give the same numbers (the bootstrap
 * uses a seeded generator).
 *
 * - `mean/reward`: mean over rows that are not masked (the headline).
 * - `strict/reward`: masked rows counted as 0, comparable with leaderboards.
 * - `mean/reward_ci95`: 95% percentile bootstrap interval of `mean/reward` (1000 resamples).
 * - with repeats > 1: `repeats/mean` and `repeats/std` (population std of the per-repeat means, as
 *   the official scorer's numpy default) and `pass@k` (unbiased estimator, per task over its scored rows).
 */
import type { Row } from '../../shared/rows.ts';

export type MetricRow = Pick<
  Row,
  'task_id' | 'repeat' | 'type' | 'subtype' | 'reward' | 'failure_kind' | 'stop_reason' | 'turns' | 'tool_calls' | 'input_tokens' | 'output_tokens' | 'wall_s'
>;

export interface GroupAccuracy {
  accuracy: number | null;
  scored: number;
  rollouts: number;
}

export interface AggregateMetrics {
  'mean/reward': number | null;
  'strict/reward': number | null;
  'mean/reward_ci95': [number, number] | null;
  num_rollouts: number;
  num_scored: number;
  num_masked: number;
  masked_by_kind: Record<string, number>;
  stop_reasons: Record<string, number>;
  accuracy_by_type: Record<string, GroupAccuracy>;
  accuracy_by_subtype: Record<string, GroupAccuracy>;
  'mean/turns': number | null;
  'mean/tool_calls': number | null;
  'mean/input_tokens': number | null;
  'mean/output_tokens': number | null;
  'mean/wall_s': number | null;
  num_repeats: number;
  'repeats/mean'?: number | null;
  'repeats/std'?: number | null;
  'repeats/means'?: Array<number | null>;
  'pass@k'?: Record<string, number | null>;
}

const round = (x: number | null): number | null => (x === null ? null : Math.round(x * 1e6) / 1e6);

function mean(values: readonly number[]): number | null {
  return values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length;
}

function countBy(rows: readonly MetricRow[], key: (r: MetricRow) => string | null): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of rows) {
    const k = key(r);
    if (k !== null) out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

function groupAccuracy(rows: readonly MetricRow[], key: (r: MetricRow) => string): Record<string, GroupAccuracy> {
  const groups = new Map<string, MetricRow[]>();
  for (const r of rows) {
    const list = groups.get(key(r));
    if (list) list.push(r);
    else groups.set(key(r), [r]);
  }
  const out: Record<string, GroupAccuracy> = {};
  for (const [k, members] of [...groups.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    const scored = members.filter((r) => r.reward !== null).map((r) => r.reward as number);
    out[k] = { accuracy: round(mean(scored)), scored: scored.length, rollouts: members.length };
  }
  return out;
}

/** mulberry32: a small seeded generator, so the interval is reproducible. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function bootstrapCi95(values: readonly number[], resamples = 1000, seed = 12345): [number, number] | null {
  if (values.length === 0) return null;
  const rand = seededRandom(seed);
  const means: number[] = [];
  for (let i = 0; i < resamples; i++) {
    let sum = 0;
    for (let j = 0; j < values.length; j++) sum += values[Math.floor(rand() * values.length)];
    means.push(sum / values.length);
  }
  means.sort((a, b) => a - b);
  const at = (q: number) => means[Math.min(means.length - 1, Math.max(0, Math.floor(q * (means.length - 1))))];
  return [round(at(0.025))!, round(at(0.975))!];
}

function binomial(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let r = 1;
  for (let i = 1; i <= k; i++) r = (r * (n - k + i)) / i;
  return r;
}

/** Unbiased pass@k for one task with n scored attempts of which c are correct. */
export function passAtK(n: number, c: number, k: number): number {
  if (n - c < k) return 1;
  return 1 - binomial(n - c, k) / binomial(n, k);
}

function repeatStats(scored: readonly MetricRow[], numRepeats: number): Partial<AggregateMetrics> {
  const means: Array<number | null> = [];
  for (let r = 0; r < numRepeats; r++) means.push(round(mean(scored.filter((x) => x.repeat === r).map((x) => x.reward as number))));
  const present = means.filter((m): m is number => m !== null);
  const mu = mean(present);
  const std = mu === null ? null : Math.sqrt(present.reduce((a, m) => a + (m - mu) ** 2, 0) / present.length);
  const byTask = new Map<string, number[]>();
  for (const r of scored) {
    const list = byTask.get(r.task_id);
    if (list) list.push(r.reward as number);
    else byTask.set(r.task_id, [r.reward as number]);
  }
  const passk: Record<string, number | null> = {};
  for (let k = 1; k <= numRepeats; k++) {
    const perTask = [...byTask.values()].filter((v) => v.length >= k).map((v) => passAtK(v.length, v.filter((x) => x === 1).length, k));
    passk[`pass@${k}`] = round(mean(perTask));
  }
  return { 'repeats/mean': round(mu), 'repeats/std': round(std), 'repeats/means': means, 'pass@k': passk };
}

export function aggregateMetrics(rows: readonly MetricRow[], numRepeats = 1): AggregateMetrics {
  const scored = rows.filter((r) => r.reward !== null && r.failure_kind === null);
  const rewards = scored.map((r) => r.reward as number);
  const base: AggregateMetrics = {
    'mean/reward': round(mean(rewards)),
    'strict/reward': round(rows.length === 0 ? null : rewards.reduce((a, b) => a + b, 0) / rows.length),
    'mean/reward_ci95': bootstrapCi95(rewards),
    num_rollouts: rows.length,
    num_scored: scored.length,
    num_masked: rows.length - scored.length,
    masked_by_kind: countBy(rows, (r) => r.failure_kind),
    stop_reasons: countBy(rows, (r) => r.stop_reason),
    accuracy_by_type: groupAccuracy(rows, (r) => r.type),
    accuracy_by_subtype: groupAccuracy(rows, (r) => r.subtype),
    'mean/turns': round(mean(rows.map((r) => r.turns))),
    'mean/tool_calls': round(mean(rows.map((r) => r.tool_calls))),
    'mean/input_tokens': round(mean(rows.map((r) => r.input_tokens))),
    'mean/output_tokens': round(mean(rows.map((r) => r.output_tokens))),
    'mean/wall_s': round(mean(rows.map((r) => r.wall_s))),
    num_repeats: numRepeats,
  };
  return numRepeats > 1 ? { ...base, ...repeatStats(scored, numRepeats) } : base;
}

export function metricsPathFor(outputJsonl: string): string {
  return outputJsonl.replace(/\.jsonl$/, '') + '_aggregate_metrics.json';
}
