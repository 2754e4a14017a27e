/**
 * The rollout table's filter and sort, kept in the URL query (`?reward=0&type=Maze&sort=wall_s&dir=desc`)
 * so that reload, the rollout page's previous/next links and the way back keep them. Pure: the same
 * rows and query give the same list, on the run page and on the rollout page.
 */
import type { Row } from '../../shared/records/rows.ts';
import { isMasked, isScored } from '../../shared/scoring/scored.ts';

/** Columns the table sorts by. */
export const SORT_KEYS = [
  'task_id', 'repeat', 'type', 'subtype', 'extracted_answer', 'expected_answer', 'reward', 'stop_reason', 'failure_kind',
  'turns', 'tool_calls', 'input_tokens', 'output_tokens', 'wall_s',
] as const;
export type SortKey = (typeof SORT_KEYS)[number];

export interface TableFilter {
  type: string;
  subtype: string;
  /** '1', '0' (scored wrong, including no answer), 'masked', or '' for all. */
  reward: '' | '1' | '0' | 'masked';
  /** A stop reason, 'none' for rows without one, or '' for all. */
  stop: string;
  /** 'no', 'yes', a failure kind, or '' for all. */
  masked: string;
  /** A repeat number as text, or '' for all. */
  repeat: string;
  /** Case-insensitive text searched in extracted answers, task ids and rollout ids. */
  q: string;
  sort: SortKey;
  dir: 'asc' | 'desc';
  /** 1-based page of the table (not part of the list; kept so reload returns to it). */
  page: number;
}

export const DEFAULT_FILTER: TableFilter = { type: '', subtype: '', reward: '', stop: '', masked: '', repeat: '', q: '', sort: 'task_id', dir: 'asc', page: 1 };

const TEXT_KEYS = ['type', 'subtype', 'stop', 'masked', 'repeat', 'q'] as const;

export function filterFromQuery(search: string): TableFilter {
  const p = new URLSearchParams(search);
  const f: TableFilter = { ...DEFAULT_FILTER };
  for (const key of TEXT_KEYS) f[key] = p.get(key) ?? '';
  const reward = p.get('reward') ?? '';
  if (reward === '1' || reward === '0' || reward === 'masked') f.reward = reward;
  const sort = p.get('sort');
  if ((SORT_KEYS as readonly string[]).includes(sort ?? '')) f.sort = sort as SortKey;
  if (p.get('dir') === 'desc') f.dir = 'desc';
  const page = Number(p.get('page'));
  if (Number.isInteger(page) && page > 1) f.page = page;
  return f;
}

/** The query of `f` without its defaults; `withPage: false` leaves the page out (links to a rollout). */
export function filterToQuery(f: TableFilter, withPage = true): string {
  const p = new URLSearchParams();
  for (const key of ['type', 'subtype', 'reward', 'stop', 'masked', 'repeat', 'q'] as const) if (f[key]) p.set(key, f[key]);
  if (f.sort !== DEFAULT_FILTER.sort) p.set('sort', f.sort);
  if (f.dir !== DEFAULT_FILTER.dir) p.set('dir', f.dir);
  if (withPage && f.page > 1) p.set('page', String(f.page));
  return p.toString();
}

function matches(row: Row, f: TableFilter, q: string): boolean {
  if (f.type && row.type !== f.type) return false;
  if (f.subtype && row.subtype !== f.subtype) return false;
  if (f.repeat && String(row.repeat) !== f.repeat) return false;
  if (f.reward === 'masked' && !isMasked(row)) return false;
  if ((f.reward === '1' || f.reward === '0') && (!isScored(row) || String(row.reward) !== f.reward)) return false;
  if (f.stop && (row.stop_reason ?? 'none') !== f.stop) return false;
  if (f.masked === 'no' && isMasked(row)) return false;
  if (f.masked === 'yes' && !isMasked(row)) return false;
  if (f.masked && f.masked !== 'no' && f.masked !== 'yes' && row.failure_kind !== f.masked) return false;
  if (q && ![row.extracted_answer ?? '', row.task_id, row.rollout_id].some((t) => t.toLowerCase().includes(q))) return false;
  return true;
}

const collator = new Intl.Collator('en', { numeric: true, sensitivity: 'base' });

/** Masked rows sort below 0 by reward; a missing value sorts first. */
function sortValue(row: Row, key: SortKey): string | number {
  if (key === 'reward') return isScored(row) ? row.reward! : -1;
  const v = row[key];
  return v === null ? '' : v;
}

function compare(a: Row, b: Row, key: SortKey): number {
  const va = sortValue(a, key);
  const vb = sortValue(b, key);
  const primary = typeof va === 'number' && typeof vb === 'number' ? va - vb : collator.compare(String(va), String(vb));
  return primary || collator.compare(a.task_id, b.task_id) || a.repeat - b.repeat;
}

/** The rows that pass `f`, in its order. */
export function applyFilter(rows: readonly Row[], f: TableFilter): Row[] {
  const q = f.q.trim().toLowerCase();
  const out = rows.filter((r) => matches(r, f, q));
  const sign = f.dir === 'desc' ? -1 : 1;
  return out.sort((a, b) => sign * compare(a, b, f.sort));
}
