/**
 * The summary table of a run's aggregate metrics, as `vcfleet run` ends with it and `vcfleet metrics`
 * prints it per run: the headline means with their interval, scored and masked rows, stop reasons
 * and accuracy by type; and the run's identity when the metrics file records it. Pure formatting:
 * `table()` (runtime.ts) aligns the columns.
 */
import type { AggregateMetrics } from '../shared/output/metrics.ts';
import { paperTableLines } from '../shared/output/paper-table.ts';
import { publishedLines, type PublishedRow } from '../shared/output/published-results.ts';
import { usdText } from '../shared/output/run-cost.ts';
import type { RunIdentity } from '../shared/output/run-identity.ts';

/** One line of a two-column table: a label, then its value. */
export type TableRow = Array<string | number>;

/** A fraction in [0, 1] as a percentage with one decimal; `-` when unknown. */
export function percent(x: number | null | undefined): string {
  return x === null || x === undefined ? '-' : `${(100 * x).toFixed(1)}%`;
}

function counts(map: Record<string, number>): string {
  return Object.entries(map).map(([k, v]) => `${k} ${v}`).join(', ');
}

function disagreement(m: AggregateMetrics): string {
  const by = m.judge_string_match_disagreements_by;
  return by && (by.judge_only || by.string_match_only) ? `: judge only ${by.judge_only}, string match only ${by.string_match_only}` : '';
}

/** What the interval resamples, as said beside it: tasks (repeats averaged per task), or rows in metrics of older versions. */
export function ciLabel(m: Pick<AggregateMetrics, 'ci_unit' | 'ci_tasks' | 'num_repeats'>): string {
  if (m.ci_unit !== 'task') return '95% CI over rows';
  return `95% CI over ${m.ci_tasks ?? '?'} tasks${m.num_repeats > 1 ? ', repeats averaged per task' : ''}, bootstrap`;
}

/** The lines that come from the metrics: means, scored / masked, stop reasons, then accuracy per type. */
export function metricsRows(m: AggregateMetrics): TableRow[] {
  const ci = m['mean/reward_ci95'];
  const masked = m.num_masked ? ` (${counts(m.masked_by_kind)})` : '';
  const rows: TableRow[] = [
    ['mean/reward', `${percent(m['mean/reward'])}${ci ? `  [${ciLabel(m)} ${percent(ci[0])} - ${percent(ci[1])}]` : ''}`],
    ['strict/reward', percent(m['strict/reward'])],
    // Old metrics files lack these.
    ...(m['mean/string_match_reward'] !== undefined ? [['string match', `${percent(m['mean/string_match_reward'])}  (judge and string match disagree on ${m.judge_string_match_disagreements ?? 0}${disagreement(m)})`]] : []),
    ['scored / masked', `${m.num_scored} / ${m.num_masked}${masked}`],
    ['stop reasons', counts(m.stop_reasons) || '-'],
  ];
  // Old metrics files lack these; a model that learns to provoke the judge, or to send calls of its own, shows here.
  if (m.judge_cache_hits !== undefined) rows.push(['judge cache', `${m.judge_cache_hits} verdict(s) from the cache (no judge call, no judge tokens)`]);
  if (m.judge_failures && Object.keys(m.judge_failures).length > 0) rows.push(['judge gave no verdict', counts(m.judge_failures)]);
  if (m.judge_no_verdict) rows.push(['judge_no_verdict', `${m.judge_no_verdict} masked: the judge's reply held no verdict (the model's text reaches it; watch for a rise)`]);
  if (m.forged_calls) rows.push(['forged calls', `${m.forged_calls} in ${m.rollouts_with_forged_calls} rollout(s) (never counted)`]);
  for (const [type, g] of Object.entries(m.accuracy_by_type)) rows.push([`  ${type}`, `${percent(g.accuracy)} (${g.scored} scored)`]);
  return rows;
}

/**
 * The paper's table (mean ± std over passes, every rollout of a pass counted, masked ones as wrong),
 * types then subtypes, and the published rows beside it; then tokens and cost. Old metrics files
 * lack these lines' figures and print none of them.
 */
export function reportRows(m: AggregateMetrics, published: readonly PublishedRow[] = []): TableRow[] {
  const rows: TableRow[] = [];
  if (m.paper) {
    const passes = `${m.paper.passes} pass${m.paper.passes === 1 ? '' : 'es'}`;
    rows.push(...paperTableLines(m.paper, `paper table (${passes})`), ...publishedLines(published));
  }
  if (m.tokens) {
    const t = m.tokens;
    rows.push(['tokens', `policy ${t.policy.input} in / ${t.policy.output} out; judge ${t.judge.input} in / ${t.judge.output} out`]);
  }
  if (m.cost_usd) rows.push(['cost', `${usdText(m.cost_usd.total)} (policy ${usdText(m.cost_usd.policy)}, judge ${usdText(m.cost_usd.judge)})`]);
  return rows;
}

/** A duration in seconds as `1h 02m 03s`, `2m 03s` or `4.5s`. */
export function duration(seconds: number): string {
  if (seconds < 60) return `${Number(seconds.toFixed(1))}s`;
  const s = Math.round(seconds);
  const [h, m, rest] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  const pad = (n: number) => String(n).padStart(2, '0');
  return h > 0 ? `${h}h ${pad(m)}m ${pad(rest)}s` : `${m}m ${pad(rest)}s`;
}

/** The lines that say which run the metrics are of: benchmark, models, config hash and its time span. */
export function identityRows(id: RunIdentity): TableRow[] {
  const span = id.started_at ? `${id.started_at} -> ${id.finished_at ?? '(no rows yet)'}` : `last row ${id.finished_at ?? '-'}`;
  return [
    ['benchmark', id.benchmark ?? '-'],
    ['policy / judge', `${id.policy_model ?? '-'} / ${id.judge_model ?? '-'}`],
    ['config hash', id.config_hash ?? '- (needs the run record)'],
    ['time', `${span}${id.wall_s === null ? '' : ` (${duration(id.wall_s)})`}`],
  ];
}
