/**
 * The run overview as one server-rendered HTML page (no script; it refreshes itself every 10 s). Each
 * run links to its page in the rollout viewer, its masked rows to the viewer's table filtered to them.
 */
import { html } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import { WORKER_ROLES, type WorkerList, type WorkerRecord } from '../shared/queue/worker-registry.ts';
import type { RunSummary } from './run-overview.ts';
import { runPageUrl } from './viewer-links.ts';

/** hono's `html` template: every interpolated string is escaped; nested `html` results are kept as markup. */
type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

function pct(x: number | null): string {
  return x === null ? '–' : `${(100 * x).toFixed(1)}%`;
}

/** Masked rows by kind, each a link to the run's rollouts of that kind. */
function maskedCell(s: RunSummary, viewerPath: string): Html | string {
  const parts = Object.entries(s.masked).map(([kind, n], i) =>
    html`${i ? ', ' : ''}<a href="${runPageUrl(viewerPath, s.run_id, new URLSearchParams({ masked: kind }).toString())}">${kind} ${n}</a>`);
  return parts.length ? html`${parts}` : '0';
}

/**
 * Rows done out of the total; a complete run is ✓ unless nothing in it was scored. The status word is
 * the CLI's (`complete`, as `vcfleet run` ends such a run with exit 3), with what is wrong beside it.
 */
function doneCell(s: RunSummary): Html {
  if (s.state === 'failed') return html`${s.done}/${s.total} complete <strong class="run-failed">✗ every row masked (nothing scored)</strong>`;
  return html`${s.done}/${s.total}${s.state === 'complete' ? ' ✓' : ''}`;
}

function failedCell(s: RunSummary, boardPath: string): Html | string {
  const parts = (Object.entries(s.failed) as Array<[string, number]>)
    .filter(([, n]) => n > 0)
    .map(([queue, n], i) => html`${i ? ', ' : ''}<a href="${boardPath}/queue/${queue}?status=failed">${queue} ${n}</a>`);
  return parts.length ? html`${parts}` : '0';
}

function row(s: RunSummary, opts: OverviewPageOptions): Html {
  return html`<tr data-run="${s.run_id}" data-state="${s.state}">
  <td><a class="run-page" href="${runPageUrl(opts.viewerPath, s.run_id)}">${s.run_id}</a> <small><a href="/api/runs/${encodeURIComponent(s.run_id)}">json</a></small></td>
  <td>${s.benchmark}</td>
  <td>${s.policy_model}</td>
  <td class="num done">${doneCell(s)}</td>
  <td class="num running">${s.running}${s.notice ? html`<br><small class="unserved run-failed">${s.notice}</small>` : ''}</td>
  <td class="num accuracy">${pct(s.accuracy)} <small>(${s.correct}/${s.scored})</small></td>
  <td class="masked">${maskedCell(s, opts.viewerPath)}</td>
  <td class="failed">${failedCell(s, opts.boardPath)}</td>
  <td class="output">${s.output ? html`<code>${s.output.path}</code> <small>on ${s.output.host}</small>` : html`<code>${s.output_jsonl_fpath}</code> <small>(not opened yet)</small>`}</td>
  <td>${s.created_at}</td>
</tr>
`;
}

export interface OverviewPageOptions {
  /** Where Bull Board is mounted, e.g. `/queues`. */
  boardPath: string;
  /** Where the rollout viewer is mounted, e.g. `/viewer`. */
  viewerPath: string;
  prefix: string;
  readOnly: boolean;
}

function workerRow(w: WorkerRecord, stale: boolean): Html {
  const seen = new Date(w.last_seen).toISOString();
  return html`<tr data-worker="${w.id}" data-state="${stale ? 'stale' : 'live'}">
  <td>${w.role}</td><td>${w.host}</td><td><code>${w.id}</code></td><td>${w.scope === null ? "the fleet's queues" : html`run <code>${w.scope}</code>`}</td>
  <td>${stale ? html`<strong class="run-failed">stopped heartbeating</strong> <small>(last seen ${seen}; its jobs come back when their locks expire)</small>` : 'live'}</td>
  <td>${w.notices.map((n, i) => html`${i ? html`<br>` : ''}${n}`)}</td>
</tr>
`;
}

/** The fleet's workers: live ones, then those that stopped heartbeating (killed, host down). */
function workersTable(workers: WorkerList): Html {
  const rows = [...workers.live.map((w) => workerRow(w, false)), ...workers.stale.map((w) => workerRow(w, true))];
  return html`<h2>Workers</h2>
<table id="workers">
<thead><tr><th>role</th><th>host</th><th>id</th><th>serves</th><th>state</th><th>notices</th></tr></thead>
<tbody>
${rows.length ? rows : html`<tr><td colspan="6">no worker is running (vcfleet worker ${WORKER_ROLES.join('|')}, or vcfleet run)</td></tr>`}</tbody></table>
`;
}

export function renderOverviewPage(runs: readonly RunSummary[], opts: OverviewPageOptions, workers: WorkerList = { live: [], stale: [] }): Html {
  const body = runs.length
    ? runs.map((s) => row(s, opts))
    : html`<tr><td colspan="10">no runs under this prefix yet (vcfleet produce / vcfleet run)</td></tr>
`;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="10">
<title>vcfleet runs</title>
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;width:100%}th,td{padding:.4em .7em;border-bottom:1px solid #ddd;text-align:left}
th{background:#f4f4f4}.num{text-align:right;white-space:nowrap}small{color:#777}.run-failed{color:#b00020}
</style></head>
<body>
<h1>vcfleet runs</h1>
<p>Prefix <code>${opts.prefix}</code>${opts.readOnly ? html` · <strong>read-only</strong>` : ''} ·
<a href="${opts.viewerPath}/">rollouts (viewer)</a> · <a href="${opts.boardPath}">queues (Bull Board)</a> · <a href="/api/runs">JSON</a></p>
<table id="runs">
<thead><tr><th>run</th><th>benchmark</th><th>policy</th><th>done/total</th><th>running</th><th>accuracy so far</th><th>masked</th><th>failed jobs</th><th>output (results host)</th><th>created</th></tr></thead>
<tbody>
${body}</tbody></table>
<p><small>Failed jobs can be retried from the board, or with <code>vcfleet retry --run-id ID [--stage rollout|judge]</code>;
judge_failed rows with <code>vcfleet rejudge --run-id ID</code>.</small></p>
${workersTable(workers)}</body></html>
`;
}
