/** The run overview as one server-rendered HTML page (no script; it refreshes itself every 10 s). */
import type { RunSummary } from './run-overview.ts';

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => ESCAPES[ch]);
}

function pct(x: number | null): string {
  return x === null ? '–' : `${(100 * x).toFixed(1)}%`;
}

function maskedText(masked: Record<string, number>): string {
  const parts = Object.entries(masked).map(([kind, n]) => `${kind} ${n}`);
  return parts.length ? parts.join(', ') : '0';
}

function failedCell(s: RunSummary, boardPath: string): string {
  const parts = (Object.entries(s.failed) as Array<[string, number]>)
    .filter(([, n]) => n > 0)
    .map(([queue, n]) => `<a href="${boardPath}/queue/${queue}?status=failed">${queue} ${n}</a>`);
  return parts.length ? parts.join(', ') : '0';
}

function row(s: RunSummary, boardPath: string): string {
  const id = escapeHtml(s.run_id);
  return `<tr data-run="${id}">
  <td><a href="/api/runs/${encodeURIComponent(s.run_id)}">${id}</a></td>
  <td>${escapeHtml(s.benchmark)}</td>
  <td>${escapeHtml(s.policy_model)}</td>
  <td class="num done">${s.done}/${s.total}${s.complete ? ' ✓' : ''}</td>
  <td class="num running">${s.running}</td>
  <td class="num accuracy">${pct(s.accuracy)} <small>(${s.correct}/${s.scored})</small></td>
  <td class="masked">${escapeHtml(maskedText(s.masked))}</td>
  <td class="failed">${failedCell(s, boardPath)}</td>
  <td>${escapeHtml(s.created_at)}</td>
</tr>`;
}

export interface OverviewPageOptions {
  /** Where Bull Board is mounted, e.g. `/queues`. */
  boardPath: string;
  prefix: string;
  readOnly: boolean;
}

export function renderOverviewPage(runs: readonly RunSummary[], opts: OverviewPageOptions): string {
  const body = runs.length
    ? runs.map((s) => row(s, opts.boardPath)).join('\n')
    : '<tr><td colspan="9">no runs under this prefix yet (vcfleet produce / vcfleet run)</td></tr>';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="10">
<title>vcfleet runs</title>
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;width:100%}th,td{padding:.4em .7em;border-bottom:1px solid #ddd;text-align:left}
th{background:#f4f4f4}.num{text-align:right;white-space:nowrap}small{color:#777}
</style></head>
<body>
<h1>vcfleet runs</h1>
<p>Prefix <code>${escapeHtml(opts.prefix)}</code>${opts.readOnly ? ' · <strong>read-only</strong>' : ''} ·
<a href="${opts.boardPath}">queues (Bull Board)</a> · <a href="/api/runs">JSON</a></p>
<table id="runs">
<thead><tr><th>run</th><th>benchmark</th><th>policy</th><th>done/total</th><th>running</th><th>accuracy so far</th><th>masked</th><th>failed jobs</th><th>created</th></tr></thead>
<tbody>
${body}
</tbody></table>
<p><small>Failed jobs can be retried from the board, or with <code>vcfleet retry --run-id ID [--stage rollout|judge]</code>;
judge_failed rows with <code>vcfleet rejudge --run-id ID</code>.</small></p>
</body></html>
`;
}
