/**
 * Aggregate metrics of a run, from its rows. Pure: the same rows give the same numbers.
 *
 * - `mean/reward`: mean over rows that are not masked (the headline).
 * - `strict/reward`: masked rows counted as 0, comparable with leaderboards.
 * - `mean/reward_ci95`: 95% percentile bootstrap interval of `mean/reward` over tasks (`ci_unit:
 *   "task"`, `ci_tasks` of them): each task's scored repeats averaged, tasks resampled, as `compare`
 *   does (paired-stats.ts: exact, or 20,000 seeded resamples past its size); with one repeat this is
 *   the binomial interval of the rows.
 * - `mean/string_match_reward`: the mean `string_match_reward` over the same rows as `mean/reward`
 *   (the reference's judge-free grade, a diagnostic); `judge_string_match_disagreements`: scored rows
 *   that one grade gives 1 and the other 0 (by direction in `..._by`): a judge that the model's text
 *   persuaded shows up as `judge_only`.
 * - with repeats > 1: `repeats/mean` and `repeats/std` (population std of the per-repeat means, as
 *   the official scorer's numpy default) and `pass@k` (unbiased estimator, per task over its scored rows).
 * - `paper`: the BabyVision paper's table (paper-table.ts); `tokens` and, with prices, `cost_usd` (run-cost.ts).
 */
import { isMasked, isScored, type Row } from '../records/rows.ts';
import { PaperTableAccumulator, type PaperTable } from './paper-table.ts';
import { costOf, type CostUsd, type Pricing, type TokenTotals } from './run-cost.ts';
import { passAtK } from './stats.ts';
import { pairedBootstrapCi95 } from './paired-stats.ts';

export { binomialCi95, bootstrapCi95, passAtK } from './stats.ts';
export { metricsPathFor } from './output-files.ts';

export type MetricRow = Pick<
  Row,
  'task_id' | 'repeat' | 'type' | 'subtype' | 'reward' | 'failure_kind' | 'stop_reason' | 'turns' | 'tool_calls' | 'input_tokens' | 'output_tokens' | 'wall_s'
> & Partial<Pick<Row, 'judge_failure' | 'forged_calls' | 'string_match_reward' | 'judge_input_tokens' | 'judge_output_tokens' | 'judge_cached'>>;

/** The fields of a row the metrics count, and nothing else (what a tally keeps of each rollout). */
export function metricRowOf(row: MetricRow): MetricRow {
  const { task_id, repeat, type, subtype, reward, failure_kind, stop_reason, turns, tool_calls, input_tokens, output_tokens, wall_s } = row;
  const { judge_failure, forged_calls, string_match_reward, judge_input_tokens, judge_output_tokens, judge_cached } = row;
  return {
    task_id, repeat, type, subtype, reward, failure_kind, stop_reason, turns, tool_calls, input_tokens, output_tokens, wall_s,
    judge_failure, forged_calls, string_match_reward, judge_input_tokens, judge_output_tokens, judge_cached,
  };
}

export interface GroupAccuracy {
  accuracy: number | null;
  scored: number;
  rollouts: number;
}

export interface AggregateMetrics {
  'mean/reward': number | null;
  'strict/reward': number | null;
  'mean/reward_ci95': [number, number] | null;
  /** What `mean/reward_ci95` resamples: tasks (each the mean of its scored repeats); absent in metrics of older versions, whose interval resampled rows. */
  ci_unit?: 'task';
  /** The tasks it resamples (those with a scored row). */
  ci_tasks?: number;
  /** Mean string-match grade over the scored rows (null when none); absent in metrics of older versions. */
  'mean/string_match_reward'?: number | null;
  /** Scored rows one grade gives 1 and the other 0; absent in metrics of older versions. */
  judge_string_match_disagreements?: number;
  /** The disagreements by direction: `judge_only` (judge 1, string match 0), `string_match_only` (the reverse). */
  judge_string_match_disagreements_by?: { judge_only: number; string_match_only: number };
  num_rollouts: number;
  num_scored: number;
  num_masked: number;
  masked_by_kind: Record<string, number>;
  /**
   * Rows the judge gave no verdict, by why (`refused_input`: scored 0; `no_verdict`, `unavailable`:
   * masked): a model that learns to provoke the judge shows up here.
   */
  judge_failures: Record<string, number>;
  /**
   * Rows masked because the judge's reply held no verdict, twice (`judge_failure: no_verdict`): the one
   * mask whose cause the model's own text can reach (it is quoted to the judge), counted apart so a rise
   * shows; absent in metrics of older versions.
   */
  judge_no_verdict?: number;
  /** Verdicts served from the judge cache (no call, 0 judge tokens) rather than by the judge; absent in metrics of older versions. */
  judge_cache_hits?: number;
  /** Rollouts in which something the model ran sent chat calls of its own (forged calls), and those calls. */
  rollouts_with_forged_calls: number;
  forged_calls: number;
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
  /** The BabyVision paper's table (paper-table.ts): mean ± population std over passes; absent in metrics of older versions. */
  paper?: PaperTable;
  /** Policy and judge tokens of every row; absent in metrics of older versions. */
  tokens?: TokenTotals;
  /** What the tokens cost, when `pricing.*` is set (run-cost.ts). */
  cost_usd?: CostUsd;
  /** The prices `cost_usd` was computed with (US dollars per million tokens). */
  pricing?: Pricing;
}

const round = (x: number | null): number | null => (x === null ? null : Math.round(x * 1e6) / 1e6);

interface Tally {
  scored: number;
  correct: number;
  rollouts: number;
}

/** Add (`sign` 1) or take away (-1) one row from a group's tally; an emptied group is forgotten. */
function bump<K>(map: Map<K, Tally>, key: K, row: MetricRow, sign: 1 | -1): void {
  let t = map.get(key);
  if (!t) map.set(key, (t = { scored: 0, correct: 0, rollouts: 0 }));
  t.rollouts += sign;
  if (isScored(row)) {
    t.scored += sign;
    if (row.reward === 1) t.correct += sign;
  }
  if (t.rollouts === 0) map.delete(key);
}

function count(map: Map<string, number>, key: string | null | undefined, sign: 1 | -1): void {
  if (key === null || key === undefined) return;
  const n = (map.get(key) ?? 0) + sign;
  if (n === 0) map.delete(key);
  else map.set(key, n);
}

const ratio = (a: number, b: number) => (b === 0 ? null : a / b);

function groups(map: Map<string, Tally>): Record<string, GroupAccuracy> {
  const out: Record<string, GroupAccuracy> = {};
  for (const [k, t] of [...map.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    out[k] = { accuracy: round(ratio(t.correct, t.scored)), scored: t.scored, rollouts: t.rollouts };
  }
  return out;
}

/**
 * The counts of a run's rows that a progress line, `vcfleet status` and the dashboard show, under the
 * metrics' own names (`num_rollouts`: rollouts with a row, scored or masked).
 */
export type TallyCounts = Pick<AggregateMetrics, 'num_rollouts' | 'num_scored' | 'num_masked' | 'masked_by_kind' | 'stop_reasons'> & {
  /** Scored rows with reward 1. */
  num_correct: number;
  /** Rows that timed out without a single answered policy call. */
  silent_timeouts: number;
  /** Rows with at least one answered policy call. */
  answered_calls: number;
  /** Verdicts served from the judge cache. */
  judge_cache_hits: number;
};

/**
 * The one tally of a run's rows: the metrics, and the counts every view shows, kept up to date row by
 * row. A row is added, or taken away again when a later row replaces it (a rejudge, a retried
 * rollout), so nothing is ever rescanned and the caller holds no rows: the state grows with tasks,
 * types and repeats, not with rollouts.
 */
export class MetricsAccumulator {
  private rollouts = 0;
  private readonly all: Tally = { scored: 0, correct: 0, rollouts: 0 };
  private readonly masked = new Map<string, number>();
  private readonly judgeFailures = new Map<string, number>();
  private readonly forged = { rollouts: 0, calls: 0 };
  private readonly stops = new Map<string, number>();
  private readonly byType = new Map<string, Tally>();
  private readonly bySubtype = new Map<string, Tally>();
  private readonly byRepeat = new Map<number, Tally>();
  private readonly byTask = new Map<string, Tally>();
  private readonly sums = { turns: 0, tool_calls: 0, input_tokens: 0, output_tokens: 0, wall_s: 0 };
  private silentTimeouts = 0;
  private answeredCalls = 0;
  private stringMatch = { sum: 0, judgeOnly: 0, stringOnly: 0 };
  private readonly paper = new PaperTableAccumulator();
  private readonly judgeTokens = { input: 0, output: 0 };
  private judgeCacheHits = 0;

  add(row: MetricRow): void {
    this.apply(row, 1);
  }

  /** Take away a row added before (the one a new row replaces). */
  remove(row: MetricRow): void {
    this.apply(row, -1);
  }

  private apply(row: MetricRow, sign: 1 | -1): void {
    this.rollouts += sign;
    if (isScored(row)) {
      this.all.scored += sign;
      if (row.reward === 1) this.all.correct += sign;
      const sm = row.string_match_reward ?? 0;
      this.stringMatch.sum += sign * sm;
      if (row.reward === 1 && sm === 0) this.stringMatch.judgeOnly += sign;
      if (row.reward === 0 && sm === 1) this.stringMatch.stringOnly += sign;
    }
    count(this.masked, row.failure_kind, sign);
    count(this.judgeFailures, row.judge_failure, sign);
    if ((row.forged_calls ?? 0) > 0) {
      this.forged.rollouts += sign;
      this.forged.calls += sign * (row.forged_calls ?? 0);
    }
    count(this.stops, row.stop_reason, sign);
    bump(this.byType, row.type, row, sign);
    bump(this.bySubtype, row.subtype, row, sign);
    bump(this.byRepeat, row.repeat, row, sign);
    bump(this.byTask, row.task_id, row, sign);
    for (const key of Object.keys(this.sums) as Array<keyof typeof this.sums>) this.sums[key] += sign * row[key];
    if (!isMasked(row) && row.stop_reason === 'timeout' && row.turns === 0) this.silentTimeouts += sign;
    if (row.turns > 0) this.answeredCalls += sign;
    if (sign === 1) this.paper.add(row);
    else this.paper.remove(row);
    this.judgeTokens.input += sign * (row.judge_input_tokens ?? 0);
    this.judgeTokens.output += sign * (row.judge_output_tokens ?? 0);
    if (row.judge_cached) this.judgeCacheHits += sign;
  }

  get size(): number {
    return this.rollouts;
  }

  /** The counts of a progress line and of `vcfleet status`. */
  counts(): TallyCounts {
    return {
      num_rollouts: this.rollouts, num_scored: this.all.scored, num_correct: this.all.correct, num_masked: this.rollouts - this.all.scored,
      masked_by_kind: Object.fromEntries(this.masked), stop_reasons: Object.fromEntries(this.stops),
      silent_timeouts: this.silentTimeouts, answered_calls: this.answeredCalls, judge_cache_hits: this.judgeCacheHits,
    };
  }

  /** The metrics; `pricing`: the run's token prices (`cost_usd` when any is set). */
  result(numRepeats = 1, pricing?: Pricing): AggregateMetrics {
    const n = this.rollouts;
    const tokens: TokenTotals = { policy: { input: this.sums.input_tokens, output: this.sums.output_tokens }, judge: { ...this.judgeTokens } };
    const cost = costOf(tokens, pricing);
    // One unit for the interval, as `compare` resamples: tasks, each the mean of its scored repeats.
    const taskMeans = [...this.byTask.values()].filter((t) => t.scored > 0).map((t) => t.correct / t.scored);
    const base: AggregateMetrics = {
      'mean/reward': round(ratio(this.all.correct, this.all.scored)),
      'strict/reward': round(ratio(this.all.correct, n)),
      'mean/reward_ci95': pairedBootstrapCi95(taskMeans),
      ci_unit: 'task',
      ci_tasks: taskMeans.length,
      'mean/string_match_reward': round(ratio(this.stringMatch.sum, this.all.scored)),
      judge_string_match_disagreements: this.stringMatch.judgeOnly + this.stringMatch.stringOnly,
      judge_string_match_disagreements_by: { judge_only: this.stringMatch.judgeOnly, string_match_only: this.stringMatch.stringOnly },
      num_rollouts: n,
      num_scored: this.all.scored,
      num_masked: n - this.all.scored,
      masked_by_kind: Object.fromEntries(this.masked),
      judge_failures: Object.fromEntries(this.judgeFailures),
      judge_no_verdict: this.judgeFailures.get('no_verdict') ?? 0,
      judge_cache_hits: this.judgeCacheHits,
      rollouts_with_forged_calls: this.forged.rollouts,
      forged_calls: this.forged.calls,
      stop_reasons: Object.fromEntries(this.stops),
      accuracy_by_type: groups(this.byType),
      accuracy_by_subtype: groups(this.bySubtype),
      'mean/turns': round(ratio(this.sums.turns, n)),
      'mean/tool_calls': round(ratio(this.sums.tool_calls, n)),
      'mean/input_tokens': round(ratio(this.sums.input_tokens, n)),
      'mean/output_tokens': round(ratio(this.sums.output_tokens, n)),
      'mean/wall_s': round(ratio(this.sums.wall_s, n)),
      num_repeats: numRepeats,
      paper: this.paper.result(numRepeats),
      tokens,
      ...(cost && pricing ? { cost_usd: cost, pricing } : {}),
    };
    return numRepeats > 1 ? { ...base, ...this.repeatStats(numRepeats) } : base;
  }

  private repeatStats(numRepeats: number): Partial<AggregateMetrics> {
    const means: Array<number | null> = [];
    for (let r = 0; r < numRepeats; r++) {
      const t = this.byRepeat.get(r);
      means.push(round(t ? ratio(t.correct, t.scored) : null));
    }
    const present = means.filter((m): m is number => m !== null);
    const mu = present.length ? present.reduce((a, b) => a + b, 0) / present.length : null;
    const std = mu === null ? null : Math.sqrt(present.reduce((a, m) => a + (m - mu) ** 2, 0) / present.length);
    const passk: Record<string, number | null> = {};
    for (let k = 1; k <= numRepeats; k++) {
      const perTask = [...this.byTask.values()].filter((t) => t.scored >= k).map((t) => passAtK(t.scored, t.correct, k));
      passk[`pass@${k}`] = round(perTask.length ? perTask.reduce((a, b) => a + b, 0) / perTask.length : null);
    }
    return { 'repeats/mean': round(mu), 'repeats/std': round(std), 'repeats/means': means, 'pass@k': passk };
  }
}

export function aggregateMetrics(rows: readonly MetricRow[], numRepeats = 1, pricing?: Pricing): AggregateMetrics {
  const acc = new MetricsAccumulator();
  for (const row of rows) acc.add(row);
  return acc.result(numRepeats, pricing);
}
