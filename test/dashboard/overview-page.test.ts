/**
 * The run overview page as HTML: text from Redis (run ids, model names, masked kinds) stays text in
 * elements, attributes and links; a run's state decides its mark (✓, failed, nothing while running).
 */
import { describe, expect, it } from 'vitest';
import { renderOverviewPage } from '../../src/dashboard/overview-page.ts';
import type { RunSummary } from '../../src/dashboard/run-overview.ts';
import { runState } from '../../src/ops/run-progress.ts';
import type { WorkerList, WorkerRecord } from '../../src/shared/queue/worker-registry.ts';
import { byStage } from '../../src/shared/queue/registry.ts';

const HOSTILE = `"><img src=x onerror=alert(1)>&'`;

function summary(over: Partial<RunSummary>): RunSummary {
  return {
    run_id: 'r', benchmark: 'babyvision_opencode', policy_model: 'p', judge_model: 'j', created_at: '2025-01-01T00:00:00Z', output_jsonl_fpath: 'results/r.jsonl', output: null,
    total: 3, done: 3, scored: 3, correct: 2, accuracy: 2 / 3, masked: {}, running: 0, failed: byStage(() => 0), complete: true, notice: null, state: 'complete', ...over,
  };
}

const render = async (runs: RunSummary[], workers?: WorkerList) => String(await renderOverviewPage(runs, { boardPath: '/queues', viewerPath: '/viewer', prefix: `p${HOSTILE}`, readOnly: false }, workers));

describe('the run overview page', () => {
  it('keeps text from Redis as text, in elements, attributes and links', async () => {
    const page = await render([
      summary({ run_id: HOSTILE, policy_model: HOSTILE, output_jsonl_fpath: HOSTILE, masked: { [HOSTILE]: 1 } }),
      summary({ run_id: 'placed', output: { host: HOSTILE, path: `/srv/${HOSTILE}.jsonl`, worker: null, at: '2025-01-01T00:00:00Z' } }),
    ]);
    expect(page).not.toContain('<img');
    expect(page).toContain(`data-run="&quot;&gt;&lt;img src=x onerror=alert(1)&gt;&amp;&#39;"`);
    const id = encodeURIComponent(HOSTILE).replace(/'/g, '&#39;');
    expect(page).toContain(`<a class="run-page" href="/viewer/runs/${id}">`);
    expect(page).toContain(`href="/viewer/runs/${id}?masked=%22%3E%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E%26%27"`);
    expect(page).toContain('<td class="output"><code>&quot;&gt;&lt;img src=x onerror=alert(1)&gt;&amp;&#39;</code> <small>(not opened yet)</small></td>');
    expect(page).toContain('<td class="output"><code>/srv/&quot;&gt;&lt;img src=x onerror=alert(1)&gt;&amp;&#39;.jsonl</code> <small>on &quot;&gt;&lt;img src=x onerror=alert(1)&gt;&amp;&#39;</small></td>');
    expect(page).toContain('Prefix <code>p&quot;&gt;&lt;img');
  });

  it('marks a complete run ✓, a run with nothing scored as failed, and a running one not at all', async () => {
    expect(runState(3, 3, 2)).toBe('complete');
    expect(runState(3, 3, 0)).toBe('failed');
    expect(runState(2, 3, 0)).toBe('running');
    expect(runState(0, 0, 0)).toBe('complete');
    const page = await render([
      summary({ run_id: 'ok' }),
      summary({ run_id: 'dead', scored: 0, correct: 0, accuracy: null, masked: { infra_failed: 3 }, state: 'failed' }),
      summary({ run_id: 'going', done: 1, complete: false, state: 'running' }),
    ]);
    const done = (run: string) => new RegExp(`data-run="${run}"[^]*?<td class="num done">([^]*?)</td>`).exec(page)?.[1];
    expect(done('ok')).toBe('3/3 ✓');
    expect(done('dead')).toBe('3/3 complete <strong class="run-failed">✗ every row masked (nothing scored)</strong>');
    expect(done('going')).toBe('1/3');
    expect(page).toContain('<a href="/viewer/runs/dead?masked=infra_failed">infra_failed 3</a>');
  });

  it('lists the workers, live ones and those that stopped heartbeating, with what they serve', async () => {
    const worker = (id: string, over: Partial<WorkerRecord> = {}): WorkerRecord => ({
      id, role: 'sandbox', host: 'gpu-1', pid: 1, started_at: '2025-01-01T00:00:00Z', last_seen: Date.parse('2025-01-01T00:05:00Z'), notices: [], scope: null, ...over,
    });
    const page = await render([], {
      live: [worker('w-live', { notices: [HOSTILE] })],
      stale: [worker('w-dead', { host: HOSTILE, role: 'judge', scope: 'my-run' })],
    });
    expect(page).not.toContain('<img');
    expect(page).toMatch(/<tr data-worker="w-live" data-state="live">\s*<td>sandbox<\/td><td>gpu-1<\/td><td><code>w-live<\/code><\/td><td>the fleet&#39;s queues<\/td>/);
    expect(page).toMatch(/<tr data-worker="w-dead" data-state="stale">\s*<td>judge<\/td><td>&quot;&gt;&lt;img[^<]*<\/td><td><code>w-dead<\/code><\/td><td>run <code>my-run<\/code><\/td>\s*<td><strong class="run-failed">stopped heartbeating<\/strong> <small>\(last seen 2025-01-01T00:05:00.000Z/);
    expect(await render([])).toContain('no worker is running');
  });
});
