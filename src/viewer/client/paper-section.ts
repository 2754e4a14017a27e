/**
 * The run page's paper table: overall, per type and per subtype as the BabyVision paper prints them
 * (`49.7 ± 1.2`: mean ± population std over passes, every rollout of a pass counted, masked ones as
 * wrong), each pass's figure beside it, and the published rows for reference.
 */
import type { AggregateMetrics } from '../../shared/output/metrics.ts';
import { paperCellText, type PaperCell } from '../../shared/output/paper-table.ts';
import type { PublishedRow } from '../../shared/output/published-results.ts';
import { h, pct } from './dom.ts';

function line(kind: string, name: string, cell: PaperCell): HTMLElement {
  return h('tr', { class: kind, 'data-group': name, 'data-mean': cell.mean ?? '', 'data-std': cell.std ?? '' },
    h('td', null, name), h('td', { class: 'num' }, paperCellText(cell)), h('td', { class: 'num' }, cell.per_pass.map((p) => pct(p)).join(' · ')));
}

/** The section, or null for metrics of an older version (no `paper`). */
export function paperSection(m: AggregateMetrics, published: readonly PublishedRow[]): HTMLElement | null {
  const t = m.paper;
  if (!t) return null;
  const rows = [
    line('overall', 'overall', t.overall),
    ...Object.entries(t.by_type).map(([k, c]) => line('type', k, c)),
    ...Object.entries(t.by_subtype).map(([k, c]) => line('subtype', k, c)),
    ...published.map((p) => h('tr', { class: 'published', 'data-published': p.name }, h('td', null, `${p.name} (published${p.kind === 'tool_augmented' ? `; with tools: ${p.passes} pass(es), ${p.step_budget} steps; ${p.source}` : ', no tools'})`), h('td', { class: 'num' }, p.overall.toFixed(1)), h('td', null, ''))),
  ];
  return h('section', { class: 'paper-box', id: 'paper' },
    h('h2', null, `The paper's table (${t.passes} pass${t.passes === 1 ? '' : 'es'})`),
    h('p', { class: 'note' }, 'accuracy in percent, mean ± population std over passes; every rollout of a pass counted (masked and unfinished as wrong)'),
    h('table', { class: 'paper' }, h('thead', null, h('tr', null, h('th', null, ''), h('th', { class: 'num' }, 'mean ± std'), h('th', { class: 'num' }, 'per pass'))), h('tbody', null, ...rows)));
}
