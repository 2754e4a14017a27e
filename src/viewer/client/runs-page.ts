/** The list of runs the source holds. */
import { h, num, pct } from './dom.ts';
import { api, urls } from './routes.ts';

export async function renderRunsPage(root: HTMLElement): Promise<void> {
  const { runs } = await api.runs();
  const rows = runs.map((r) => h('tr', { 'data-run': r.run_id },
    h('td', null, h('a', { href: urls.run(r.run_id) }, r.run_id)),
    h('td', null, r.benchmark),
    h('td', null, r.policy_model),
    h('td', { class: 'num' }, num(r.rollouts)),
    h('td', { class: 'num' }, `${pct(r.mean_reward)} (${num(r.correct)}/${num(r.scored)})`),
    h('td', null, r.last_finished_at),
  ));
  root.replaceChildren(
    h('h1', null, 'Runs'),
    runs.length > 1 ? h('p', null, h('a', { href: urls.compare(), id: 'compare-link' }, 'Compare two runs')) : '',
    runs.length
      ? h('table', { class: 'runs' },
        h('thead', null, h('tr', null, ...['run', 'benchmark', 'policy', 'rollouts', 'mean/reward', 'last row'].map((t) => h('th', null, t)))),
        h('tbody', null, ...rows))
      : h('p', null, 'No rows yet.'),
  );
}
