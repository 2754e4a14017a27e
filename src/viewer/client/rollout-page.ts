/**
 * The rollout page: the puzzle, every turn in order, then the outcome and the judge's verdict.
 * Previous/next follow the table's filter (kept in the query); other repeats of the task are linked.
 * A row without its transcript on this host still gets a page, from the row alone.
 */
import type { Row } from '../../shared/records/rows.ts';
import type { TranscriptRecord } from '../../shared/records/transcript.ts';
import type { TokenCaptureView, TranscriptLookup } from '../source.ts';
import { h, num, type Child } from './dom.ts';
import { api, urls } from './routes.ts';
import { applyFilter, filterFromQuery, filterToQuery } from './table-filter.ts';
import { puzzleView, textBlock, turnView } from './transcript-view.ts';
import { isMasked } from '../../shared/scoring/scored.ts';
import { captureMasks } from '../../shared/records/capture-mask.ts';

const rewardText = (r: Row) => (isMasked(r) ? 'masked' : r.reward === null ? '–' : String(r.reward));

function counts(c: Record<string, number>): string {
  const parts = Object.entries(c).map(([k, n]) => `${k} ${num(n)}`);
  return parts.length ? parts.join(', ') : 'none';
}

/** One grade gives 1 and the other 0 (a scored row). */
function gradesDisagree(row: Row): boolean {
  return !isMasked(row) && ((row.reward === 1 && row.string_match_reward === 0) || (row.reward === 0 && row.string_match_reward === 1));
}

function fact(key: string, label: string, value: Child): HTMLElement[] {
  return [h('dt', null, label), h('dd', { 'data-field': key }, value)];
}

function navigation(row: Row, rows: readonly Row[]): HTMLElement {
  const query = location.search.slice(1);
  const f = filterFromQuery(query);
  const list = applyFilter(rows, f);
  const at = list.findIndex((r) => r.rollout_id === row.rollout_id);
  const link = (r: Row | undefined, rel: string, text: string) =>
    r ? h('a', { href: urls.rollout(row.run_id, r.rollout_id, filterToQuery(f, false)), rel, class: rel, 'data-rollout': r.rollout_id }, text) : h('span', { class: `${rel} disabled` }, text);
  const position = at < 0 ? 'not in the current filter' : `${num(at + 1)} of ${num(list.length)} in the current filter`;
  const attempts = rows.filter((r) => r.task_id === row.task_id).sort((a, b) => a.repeat - b.repeat);
  return h('nav', { class: 'rollout-nav' },
    h('a', { href: `${urls.run(row.run_id, filterToQuery(f))}#rollouts`, class: 'back' }, '↑ table'), ' ',
    link(at > 0 ? list[at - 1] : undefined, 'prev', '‹ previous'), ' ',
    link(at >= 0 ? list[at + 1] : undefined, 'next', 'next ›'), ' ',
    h('span', { class: 'position' }, position),
    attempts.length > 1
      ? h('span', { class: 'attempts' }, ' · repeats of this task: ', ...attempts.map((r) => r.rollout_id === row.rollout_id
        ? h('strong', null, ` ${r.repeat} `)
        : h('a', { href: urls.rollout(r.run_id, r.rollout_id, filterToQuery(f, false)), class: 'attempt', 'data-repeat': r.repeat, title: `reward ${rewardText(r)}` }, ` ${r.repeat} (${rewardText(r)}) `)))
      : '',
  );
}

function summary(row: Row): HTMLElement {
  return h('dl', { class: 'facts' },
    ...fact('type', 'type / subtype', `${row.type} / ${row.subtype}`),
    ...fact('expected_answer', 'expected answer', h('code', null, row.expected_answer)),
    ...fact('turns', 'turns · tool calls', `${row.turns} · ${row.tool_calls}`),
    ...fact('tokens', 'tokens', `${num(row.input_tokens)} in / ${num(row.output_tokens)} out`),
    ...fact('wall_s', 'wall time', `${row.wall_s.toFixed(1)} s`),
    ...fact('policy_model', 'policy', row.policy_model),
    ...fact('finished_at', 'finished', row.finished_at),
  );
}

function outcome(row: Row, record: TranscriptRecord | null): HTMLElement {
  const judge = record?.judge ?? null;
  return h('section', { class: 'outcome' },
    h('h2', null, 'Outcome'),
    h('dl', { class: 'facts' },
      ...fact('extracted_answer', 'extracted answer', row.extracted_answer === null ? '— (none)' : h('code', null, row.extracted_answer)),
      ...fact('stop_reason', 'stop reason', row.stop_reason ?? '—'),
      ...fact('failure_kind', 'masked', row.failure_kind ?? 'no'),
      ...fact('error', 'error', row.error ?? '—'),
      ...fact('limit_hits', 'limit hits', counts(row.limit_hits)),
      ...fact('refused_requests', 'refused requests', counts(row.refused_requests)),
      ...fact('judge_verdict', 'verdict', `${row.judge_verdict ?? '— (not judged)'}${judge?.cached ? ' (from the verdict cache)' : ''}`),
      ...fact('grades', 'grades', h('span', { class: 'grades' },
        h('span', { class: 'grade', 'data-grade': 'judge' }, `judge: ${rewardText(row)}`), ' · ',
        h('span', { class: 'grade', 'data-grade': 'string_match' }, `string match: ${row.string_match_reward}`),
        gradesDisagree(row) ? h('strong', { class: 'disagree' }, ' (they disagree)') : '')),
      ...fact('reward', 'reward', rewardText(row)),
      ...fact('failure_reason', 'failure reason', row.failure_reason ?? '—'),
      ...fact('judge_model', 'judge', row.judge_model ?? '—'),
    ),
    row.judge_reason !== null ? h('div', { class: 'judge-reason' }, h('div', { class: 'label' }, "judge's reason"), h('pre', { class: 'text' }, row.judge_reason)) : '',
    judge ? h('div', { class: 'judge-prompt' }, textBlock('judge prompt: system', judge.prompt.system, { collapsed: true }), textBlock('judge prompt: user', judge.prompt.user, { collapsed: true })) : '',
  );
}

function agentView(record: TranscriptRecord): HTMLElement | string {
  const a = record.agent;
  if (!a) return '';
  return h('section', { class: 'agent' }, h('h2', null, 'OpenCode'),
    h('p', null, `exit code ${a.exit_code ?? '–'} · signal ${a.signal ?? '–'} · ${a.timed_out ? 'timed out' : 'in time'} · attempt ${record.attempt}`),
    a.stderr_tail ? textBlock('stderr (tail, as OpenCode wrote it)', a.stderr_tail, { collapsed: true }) : '');
}

/** Token capture: calls, chain, mask and, from the trajectory file when this host holds it, each turn's token counts. */
function tokenCaptureView(row: Row, view: TokenCaptureView | null | undefined): HTMLElement | string {
  const tc = row.token_capture;
  if (!tc) return '';
  const chain = tc.contiguous ? 'contiguous' : `broken${view?.chain.breaks[0] ? ` at call ${view.chain.breaks[0].call}: ${view.chain.breaks[0].why}` : ''}`;
  const mask = captureMasks(tc) ? `yes: ${tc.mask_reason ?? '?'}${view?.mask_detail ? ` (${view.mask_detail})` : ''}` : 'no (trainable)';
  return h('section', { class: 'token-capture' },
    h('h2', null, 'Token capture'),
    h('dl', { class: 'facts' },
      ...fact('tc_calls', 'calls', view ? `${num(tc.calls)} of the conversation · ${num(view.other_calls)} apart` : num(tc.calls)),
      ...fact('tc_chain', 'chain', chain),
      ...fact('tc_mask', 'mask_sample', mask),
      ...(view ? [
        ...fact('tc_weight_version', 'weight version', view.weight_version ?? '—'),
        ...fact('tc_flat', 'flat form', `${num(view.flat_calls)} call(s), ${num(view.response_tokens)} response tokens`),
      ] : []),
      ...fact('tc_file', 'trajectory', row.trajectory ?? '— (not kept)'),
    ),
    view
      ? h('table', { class: 'token-turns' },
        h('thead', null, h('tr', null, h('th', null, 'call'), h('th', null, 'inserted (environment)'), h('th', null, 'generated (policy)'))),
        h('tbody', null, ...view.turns.map((t) => h('tr', { 'data-call': t.call }, h('td', null, String(t.call)), h('td', { class: 'inserted' }, num(t.inserted)), h('td', { class: 'generated' }, num(t.generated))))))
      : h('p', { class: 'notice' }, 'The trajectory file is not on this host; the counts above are from the row.'),
  );
}

function transcriptNotice(t: TranscriptLookup): HTMLElement | null {
  if (t.status === 'found') return null;
  const text = t.status === 'not_kept' ? 'No transcript was kept for this rollout; this page shows its row only.'
    : t.status === 'missing' ? `The transcript is not on this host: looked for ${t.looked_for}. This page shows the row only.`
      : `The transcript could not be used: ${t.looked_for} is ${t.problem}. This page shows the row only.`;
  return h('p', { class: `notice transcript-${t.status}`, role: 'status' }, text);
}

export async function renderRolloutPage(root: HTMLElement, runId: string, rolloutId: string): Promise<void> {
  const [{ row, transcript, token_capture }, { rows }] = await Promise.all([api.rollout(runId, rolloutId), api.rows(runId)]);
  const record = transcript.status === 'found' ? transcript.record : null;
  document.title = `${row.task_id} #${row.repeat} · ${row.run_id}`;
  root.replaceChildren(
    h('nav', { class: 'crumbs' }, h('a', { href: urls.runs() }, 'runs'), ' / ', h('a', { href: urls.run(runId, filterToQuery(filterFromQuery(location.search))) }, runId), ' / ', row.rollout_id),
    navigation(row, rows),
    h('h1', null, `Task ${row.task_id}, repeat ${row.repeat} `, h('span', { class: `reward reward-${rewardText(row)}` }, `reward ${rewardText(row)}`)),
    summary(row),
    transcriptNotice(transcript) ?? '',
    record ? puzzleView(record) : '',
    record ? h('section', { class: 'turns' }, h('h2', null, `Turns (${record.turns.length})`), ...record.turns.map(turnView)) : '',
    record?.truncated.length ? h('p', { class: 'notice' }, `Dropped to keep the record small: ${record.truncated.join(', ')}`) : '',
    outcome(row, record),
    tokenCaptureView(row, token_capture),
    record ? agentView(record) : '',
    h('p', { class: 'raw' }, h('a', { href: urls.apiRollout(runId, rolloutId) }, 'raw JSON')),
  );
}
