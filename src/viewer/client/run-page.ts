/** The run page: headline metrics, charts, and the rollout table. */
import type { AggregateMetrics } from '../../shared/output/metrics.ts';
import { accuracyChart, histogramChart, outcomeChart } from './charts.ts';
import { h, num, pct, type Child } from './dom.ts';
import { paperSection } from './paper-section.ts';
import { rolloutTable } from './rollout-table.ts';
import { api, urls, type RunPayload } from './routes.ts';
import { usdText } from '../../shared/output/run-cost.ts';
import { filterFromQuery, filterToQuery } from './table-filter.ts';

function card(metric: string, label: string, value: string, ...detail: Child[]): HTMLElement {
  return h('div', { class: 'card', 'data-metric': metric }, h('div', { class: 'card-label' }, label), h('div', { class: 'card-value' }, value), h('div', { class: 'card-detail' }, ...detail));
}

function kinds(byKind: Record<string, number>): string {
  const parts = Object.entries(byKind).sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${k} ${num(n)}`);
  return parts.length ? parts.join(', ') : 'none';
}

function mean(m: AggregateMetrics, key: keyof AggregateMetrics, digits: number): string {
  const v = m[key];
  return typeof v === 'number' ? v.toFixed(digits) : '–';
}

function headline(m: AggregateMetrics): HTMLElement {
  const ci = m['mean/reward_ci95'];
  const cards = [
    card('mean/reward', 'mean/reward', pct(m['mean/reward']), ci ? `95% CI over ${m.ci_unit === 'task' ? `${m.ci_tasks ?? '?'} tasks` : 'rows'} ${pct(ci[0])} – ${pct(ci[1])}` : 'no scored rollouts', h('br'), 'masked rows left out'),
    card('strict/reward', 'strict/reward', pct(m['strict/reward']), 'masked rows counted as 0'),
    ...(m['mean/string_match_reward'] !== undefined
      ? [card('mean/string_match_reward', 'string match', pct(m['mean/string_match_reward'] ?? null), 'the judge-free grade (a diagnostic)', h('br'),
        `disagrees with the judge on ${num(m.judge_string_match_disagreements ?? 0)}`)]
      : []),
    card('rollouts', 'rollouts', num(m.num_rollouts), `scored ${num(m.num_scored)}`),
    card('masked', 'masked', num(m.num_masked), kinds(m.masked_by_kind)),
  ];
  if (m['repeats/mean'] !== undefined) {
    const passK = Object.entries(m['pass@k'] ?? {}).map(([k, v]) => `${k} ${pct(v)}`).join(' · ');
    cards.push(card('repeats', `${m.num_repeats} repeats`, `${pct(m['repeats/mean'] ?? null)} ± ${pct(m['repeats/std'] ?? null)}`, passK));
  }
  const means = h('p', { class: 'means' },
    `mean per rollout: ${mean(m, 'mean/turns', 1)} turns · ${mean(m, 'mean/tool_calls', 1)} tool calls · `,
    `${mean(m, 'mean/input_tokens', 0)} input / ${mean(m, 'mean/output_tokens', 0)} output tokens · ${mean(m, 'mean/wall_s', 1)} s wall`,
    m.tokens ? ` · in all: policy ${num(m.tokens.policy.input)} / ${num(m.tokens.policy.output)}, judge ${num(m.tokens.judge.input)} / ${num(m.tokens.judge.output)} tokens` : '',
    m.cost_usd ? ` · cost ${usdText(m.cost_usd.total)}` : '');
  return h('section', { class: 'headline' }, h('div', { class: 'cards' }, ...cards), means);
}

function charts(p: RunPayload): HTMLElement {
  const mean = p.metrics['mean/reward'];
  const v = p.view;
  return h('section', { class: 'charts' },
    h('div', { class: 'chart-box', id: 'by-type' }, h('h2', null, 'Accuracy by type'), h('p', { class: 'note' }, 'bars: correct / scored; whiskers: 95% Wilson interval; dashed: run mean'),
      accuracyChart(v.by_type, { mean, label: 'accuracy by type' })),
    h('div', { class: 'chart-box', id: 'outcomes' }, h('h2', null, 'Outcomes'), h('p', { class: 'note' }, 'one outcome per rollout; masked rows by their failure kind'), outcomeChart(v.outcomes)),
    h('div', { class: 'chart-box', id: 'by-subtype' }, h('h2', null, 'Accuracy by subtype'), accuracyChart(v.by_subtype, { mean, byType: true, label: 'accuracy by subtype' })),
    h('div', { class: 'chart-box', id: 'distributions' }, h('h2', null, 'Distributions'), h('div', { class: 'histograms' },
      h('figure', { id: 'hist-turns' }, histogramChart(v.histograms.turns, 'turns'), h('figcaption', null, 'turns per rollout')),
      h('figure', { id: 'hist-tool-calls' }, histogramChart(v.histograms.tool_calls, 'tool calls'), h('figcaption', null, 'tool calls per rollout')),
      h('figure', { id: 'hist-wall' }, histogramChart(v.histograms.wall_s, 'seconds'), h('figcaption', null, 'wall time per rollout (s)')),
    )),
  );
}

export async function renderRunPage(root: HTMLElement, runId: string): Promise<void> {
  const [payload, { rows }] = await Promise.all([api.run(runId), api.rows(runId)]);
  const m = payload.meta;
  document.title = `${m.run_id} · ${document.body.dataset.title ?? 'vcfleet'}`;
  const problems = m.problems.length ? h('div', { class: 'problems', role: 'alert' }, h('strong', null, 'Read with problems:'), h('ul', null, ...m.problems.map((p) => h('li', null, p)))) : null;
  const notices = m.notices?.length ? h('div', { class: 'notices', role: 'status' }, ...m.notices.map((n) => h('p', null, n))) : null;
  const table = rolloutTable(runId, rows, filterFromQuery(location.search), (f) => {
    history.replaceState(null, '', urls.run(runId, filterToQuery(f)) + location.hash);
  });
  root.replaceChildren(
    h('nav', { class: 'crumbs' }, h('a', { href: urls.runs() }, 'runs'), ' / ', m.run_id),
    h('h1', null, `Run ${m.run_id}`),
    h('p', { class: 'sub' }, `${m.benchmark} · policy ${m.policy_model} · judge ${m.judge_model ?? '–'} · ${m.origin}`),
    problems ?? '',
    notices ?? '',
    headline(payload.metrics),
    paperSection(payload.metrics, payload.published ?? []) ?? '',
    charts(payload),
    table,
  );
}
