/** The viewer's client entry: draw the page the URL names, or say what went wrong. */
import { h } from './dom.ts';
import { renderComparePage } from './compare-page.ts';
import { renderRolloutPage } from './rollout-page.ts';
import { currentPage, urls } from './routes.ts';
import { renderRunPage } from './run-page.ts';
import { renderRunsPage } from './runs-page.ts';

async function render(root: HTMLElement): Promise<void> {
  const page = currentPage();
  if (page.kind === 'runs') return renderRunsPage(root);
  if (page.kind === 'run') return renderRunPage(root, page.runId);
  if (page.kind === 'rollout') return renderRolloutPage(root, page.runId, page.rolloutId);
  if (page.kind === 'compare') return renderComparePage(root, page.a, page.b);
  root.replaceChildren(h('p', { class: 'error' }, `No viewer page at ${page.path}. `), h('a', { href: urls.runs() }, 'runs'));
}

const root = document.getElementById('app');
if (root) {
  render(root).then(
    // Marks for tests and the load benchmark (bench/viewer.ts): the page is drawn and its controls work.
    () => {
      performance.mark('vcfleet-ready');
      document.body.dataset.ready = 'true';
    },
    (err: unknown) => {
      root.replaceChildren(h('p', { class: 'error', role: 'alert' }, `Cannot show this page: ${err instanceof Error ? err.message : String(err)}`), h('a', { href: urls.runs() }, 'runs'));
      document.body.dataset.ready = 'error';
    },
  );
}
