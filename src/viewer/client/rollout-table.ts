/**
 * The rollout table: filter controls, sortable headers and pages of `PAGE_SIZE` rows, so that a run
 * of 3,104 rollouts renders 100 table rows at a time. Its state lives in the URL query.
 */
import type { Row } from '../../shared/records/rows.ts';
import { fill, h, num } from './dom.ts';
import { urls } from './routes.ts';
import { applyFilter, DEFAULT_FILTER, filterToQuery, type SortKey, type TableFilter } from './table-filter.ts';
import { isMasked } from '../../shared/scoring/scored.ts';

export const PAGE_SIZE = 100;

interface Column {
  key: SortKey;
  label: string;
  numeric?: boolean;
  cell(row: Row, linkQuery: string, runId: string): Node | string;
}

const rewardText = (r: Row) => (isMasked(r) ? 'masked' : r.reward === null ? '–' : String(r.reward));

const COLUMNS: Column[] = [
  { key: 'task_id', label: 'task', cell: (r, q, run) => h('a', { href: urls.rollout(run, r.rollout_id, q), class: 'rollout-link' }, r.task_id) },
  { key: 'repeat', label: 'repeat', numeric: true, cell: (r) => String(r.repeat) },
  { key: 'type', label: 'type', cell: (r) => r.type },
  { key: 'subtype', label: 'subtype', cell: (r) => r.subtype },
  { key: 'extracted_answer', label: 'answer', cell: (r) => r.extracted_answer ?? '—' },
  { key: 'expected_answer', label: 'expected', cell: (r) => r.expected_answer },
  { key: 'reward', label: 'reward', cell: (r) => h('span', { class: `reward reward-${rewardText(r)}` }, rewardText(r)) },
  { key: 'stop_reason', label: 'stop reason', cell: (r) => r.stop_reason ?? '—' },
  { key: 'failure_kind', label: 'masked', cell: (r) => r.failure_kind ?? '' },
  { key: 'turns', label: 'turns', numeric: true, cell: (r) => String(r.turns) },
  { key: 'tool_calls', label: 'tools', numeric: true, cell: (r) => String(r.tool_calls) },
  { key: 'wall_s', label: 'wall s', numeric: true, cell: (r) => r.wall_s.toFixed(1) },
];

function distinct(rows: readonly Row[], pick: (r: Row) => string): string[] {
  const collator = new Intl.Collator('en', { numeric: true });
  return [...new Set(rows.map(pick))].sort(collator.compare);
}

function select(name: keyof TableFilter, label: string, options: Array<[string, string]>, value: string): HTMLLabelElement {
  const el = h('select', { name, 'aria-label': label });
  for (const [v, text] of [['', 'all'] as [string, string], ...options]) el.append(h('option', { value: v, selected: v === value }, text));
  return h('label', null, `${label} `, el);
}

function controls(rows: readonly Row[], f: TableFilter): HTMLFormElement {
  const same = (v: string): [string, string] => [v, v];
  const form = h('form', { class: 'filters', role: 'search' },
    select('type', 'type', distinct(rows, (r) => r.type).map(same), f.type),
    select('subtype', 'subtype', distinct(rows, (r) => r.subtype).map(same), f.subtype),
    select('reward', 'reward', [['1', '1 (correct)'], ['0', '0 (wrong)'], ['masked', 'masked']], f.reward),
    select('stop', 'stop reason', distinct(rows, (r) => r.stop_reason ?? 'none').map(same), f.stop),
    select('masked', 'masked', [['no', 'no'], ['yes', 'yes'], ...distinct(rows.filter((r) => r.failure_kind), (r) => r.failure_kind ?? '').map(same)], f.masked),
    select('repeat', 'repeat', distinct(rows, (r) => String(r.repeat)).map(same), f.repeat),
    h('label', null, 'search ', h('input', { type: 'search', name: 'q', value: f.q, placeholder: 'answer or task id', 'aria-label': 'search answers and task ids' })),
    h('button', { type: 'reset' }, 'clear'),
  );
  form.addEventListener('submit', (e) => e.preventDefault());
  return form;
}

function readControls(form: HTMLFormElement, f: TableFilter): TableFilter {
  const data = new FormData(form);
  const get = (k: string) => String(data.get(k) ?? '');
  return { ...f, type: get('type'), subtype: get('subtype'), reward: get('reward') as TableFilter['reward'], stop: get('stop'), masked: get('masked'), repeat: get('repeat'), q: get('q'), page: 1 };
}

function header(f: TableFilter, onSort: (key: SortKey) => void): HTMLTableSectionElement {
  const tr = h('tr');
  for (const col of COLUMNS) {
    const active = f.sort === col.key;
    const th = h('th', { class: col.numeric ? 'num' : null, 'aria-sort': active ? (f.dir === 'asc' ? 'ascending' : 'descending') : null },
      h('button', { type: 'button', class: 'sort', 'data-sort': col.key }, col.label, active ? (f.dir === 'asc' ? ' ▲' : ' ▼') : ''));
    th.querySelector('button')?.addEventListener('click', () => onSort(col.key));
    tr.append(th);
  }
  return h('thead', null, tr);
}

function body(rows: readonly Row[], runId: string, linkQuery: string): HTMLTableSectionElement {
  const tbody = h('tbody');
  for (const r of rows) {
    const tr = h('tr', { 'data-rollout': r.rollout_id, 'data-reward': rewardText(r) });
    for (const col of COLUMNS) tr.append(h('td', { class: col.numeric ? 'num' : null }, col.cell(r, linkQuery, runId)));
    tbody.append(tr);
  }
  return tbody;
}

/** The table for `rows` of `runId`, starting from filter `initial`; `onChange` gets every new filter (to put in the URL). */
export function rolloutTable(runId: string, rows: readonly Row[], initial: TableFilter, onChange: (f: TableFilter) => void): HTMLElement {
  let f = initial;
  const form = controls(rows, f);
  const count = h('p', { class: 'table-count', 'aria-live': 'polite' });
  const table = h('table', { class: 'rollouts' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'table pages' });

  const render = () => {
    const list = applyFilter(rows, f);
    const pages = Math.max(1, Math.ceil(list.length / PAGE_SIZE));
    f = { ...f, page: Math.min(f.page, pages) };
    const start = (f.page - 1) * PAGE_SIZE;
    const shown = list.slice(start, start + PAGE_SIZE);
    count.dataset.count = String(list.length);
    fill(count, list.length
      ? `Showing ${num(start + 1)}–${num(start + shown.length)} of ${num(list.length)} rollouts${list.length < rows.length ? ` (filtered from ${num(rows.length)})` : ''}`
      : `No rollout matches (of ${num(rows.length)}).`);
    fill(table, header(f, (key) => update({ ...f, sort: key, dir: f.sort === key && f.dir === 'asc' ? 'desc' : 'asc', page: 1 })), body(shown, runId, filterToQuery(f, false)));
    const go = (page: number, text: string, enabled: boolean) => {
      const b = h('button', { type: 'button', disabled: !enabled, 'data-page': page }, text);
      b.addEventListener('click', () => update({ ...f, page }));
      return b;
    };
    fill(pager, go(f.page - 1, '‹ previous page', f.page > 1), ` page ${f.page} of ${pages} `, go(f.page + 1, 'next page ›', f.page < pages));
    onChange(f);
  };
  const update = (next: TableFilter) => {
    f = next;
    render();
  };

  let timer: ReturnType<typeof setTimeout> | undefined;
  form.addEventListener('change', () => update(readControls(form, f)));
  form.addEventListener('input', (e) => {
    if ((e.target as HTMLElement).getAttribute('name') !== 'q') return;
    clearTimeout(timer);
    timer = setTimeout(() => update(readControls(form, f)), 150);
  });
  form.addEventListener('reset', () => setTimeout(() => update({ ...DEFAULT_FILTER, sort: f.sort, dir: f.dir })));
  render();
  return h('section', { class: 'table-section', id: 'rollouts' }, h('h2', null, 'Rollouts'), form, count, table, pager);
}
