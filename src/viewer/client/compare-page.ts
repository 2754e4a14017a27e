/**
 * The compare page: two runs chosen from the source's list, then run B against run A paired by task:
 * the headline figures, a per-type chart of both with their intervals, and the flipped puzzles as a
 * table that links to the rollouts of both runs.
 */
import type { Comparison } from '../../shared/output/compare-runs.ts';
import type { RunListEntry, RunMeta } from '../source.ts';
import { compareChart } from './compare-chart.ts';
import { h, num, pct } from './dom.ts';
import { api, urls } from './routes.ts';

function card(metric: string, label: string, value: string, detail: string): HTMLElement {
  return h('div', { class: 'card', 'data-metric': metric }, h('div', { class: 'card-label' }, label), h('div', { class: 'card-value' }, value), h('div', { class: 'card-detail' }, detail));
}

/** `+3.2 pp` */
function points(x: number | null): string {
  if (x === null) return '–';
  const text = Math.abs(100 * x).toFixed(1);
  return `${Number(text) === 0 ? '' : x > 0 ? '+' : '−'}${text} pp`;
}

/** The chooser: two selects of the source's runs; the button goes to `?a=&b=` (the pages' CSP allows no form posts). */
function chooser(runs: readonly RunListEntry[], a: string, b: string): HTMLElement {
  const select = (name: string, chosen: string) => h('select', { name, id: `run-${name}` },
    ...runs.map((r) => h('option', { value: r.run_id, selected: r.run_id === chosen }, `${r.run_id} · ${r.policy_model} · ${pct(r.mean_reward)}`)));
  const selectA = select('a', a || runs[1]?.run_id || runs[0]?.run_id || '');
  const selectB = select('b', b || runs[0]?.run_id || '');
  const go = h('button', { type: 'button', id: 'compare-go' }, 'compare');
  go.addEventListener('click', () => location.assign(urls.compare(selectA.value, selectB.value)));
  return h('div', { class: 'filters chooser' }, h('label', { for: 'run-a' }, 'run A '), selectA, h('label', { for: 'run-b' }, 'run B '), selectB, go);
}

function sideLine(side: string, meta: RunMeta): HTMLElement {
  return h('p', { class: 'sub', 'data-side': side }, `${side}: `, h('a', { href: urls.run(meta.run_id) }, meta.run_id), ` · ${meta.benchmark} · policy ${meta.policy_model}`);
}

function headline(c: Comparison): HTMLElement {
  const ci = c.difference_ci95 ? `95% CI ${points(c.difference_ci95[0])} – ${points(c.difference_ci95[1])}` : 'no paired tasks';
  const test = c.p_method === 'mcnemar_exact' ? "McNemar's exact p" : 'sign test p (repeats)';
  return h('div', { class: 'cards' },
    card('accuracy_a', 'run A', pct(c.accuracy_a), `${num(c.pairs)} paired tasks`),
    card('accuracy_b', 'run B', pct(c.accuracy_b), c.unpaired.length ? `${num(c.unpaired.length)} unpaired, left out` : 'every task paired'),
    card('difference', 'B − A', points(c.difference), ci),
    card('flips', 'flips', `${num(c.a_right_b_wrong)} / ${num(c.a_wrong_b_right)}`, 'A right B wrong / A wrong B right'),
    card('mcnemar_p', test, c.mcnemar_p === null ? '–' : c.mcnemar_p.toFixed(4), 'two-sided, exact'),
  );
}

const links = (runId: string, ids: readonly string[]) => ids.flatMap((id, i) => [i ? ' ' : '', h('a', { href: urls.rollout(runId, id), 'data-rollout': id }, ids.length > 1 ? `#${i + 1}` : 'rollout')]);

function flipsTable(c: Comparison, a: RunMeta, b: RunMeta): HTMLElement {
  if (c.flipped.length === 0) return h('p', { class: 'note' }, 'No puzzle flipped.');
  const score = (x: number) => h('span', { class: `reward reward-${x >= 1 ? 1 : x <= 0 ? 0 : 'masked'}` }, x === 0 || x === 1 ? String(x) : x.toFixed(2));
  return h('table', { class: 'flips' },
    h('thead', null, h('tr', null, ...['task', 'type', 'subtype', 'A', 'B', 'run A', 'run B'].map((t) => h('th', null, t)))),
    h('tbody', null, ...c.flipped.map((f) => h('tr', { 'data-task': f.task_id },
      h('td', null, f.task_id), h('td', null, f.type), h('td', null, f.subtype), h('td', null, score(f.score_a)), h('td', null, score(f.score_b)),
      h('td', null, ...links(a.run_id, f.rollouts_a)), h('td', null, ...links(b.run_id, f.rollouts_b))))));
}

export async function renderComparePage(root: HTMLElement, a: string, b: string): Promise<void> {
  document.title = `compare · ${document.body.dataset.title ?? 'vcfleet'}`;
  const { runs } = await api.runs();
  const head = [h('nav', { class: 'crumbs' }, h('a', { href: urls.runs() }, 'runs'), ' / compare'), h('h1', null, 'Compare two runs'), chooser(runs, a, b)];
  if (!a || !b) {
    root.replaceChildren(...head, h('p', { class: 'note' }, runs.length < 2 ? 'Compare needs two runs; this source has fewer.' : 'Choose run A and run B.'));
    return;
  }
  const { comparison: c, a: metaA, b: metaB } = await api.compare(a, b);
  const unpaired = c.unpaired.length
    ? h('p', { class: 'note', id: 'unpaired' }, `Unpaired (scored on one side only, left out): ${c.unpaired.map((u) => `${u.task_id} (${u.scored_in.toUpperCase()})`).join(', ')}`)
    : null;
  root.replaceChildren(
    ...head,
    sideLine('A', metaA), sideLine('B', metaB),
    h('section', { class: 'headline' }, headline(c)),
    h('section', { class: 'charts' },
      h('div', { class: 'chart-box', id: 'compare-by-type' }, h('h2', null, 'Accuracy by type, both runs'),
        h('p', { class: 'note' }, 'over the paired tasks; whiskers: 95% bootstrap interval over tasks'), compareChart(c.by_type, 'accuracy by type of both runs'))),
    h('h2', null, `Flipped puzzles (${num(c.flipped.length)})`),
    flipsTable(c, metaA, metaB),
    unpaired ?? '',
  );
}
