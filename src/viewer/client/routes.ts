/** The viewer's URLs, all under the base path the server put in `<body data-base>`. */
import type { RolloutData, RunData, RunListEntry, RunMeta } from '../source.ts';
import type { RunView } from '../run-view.ts';
import type { ComparePayload } from '../compare-api.ts';
import type { PublishedRow } from '../../shared/output/published-results.ts';

export type Page =
  | { kind: 'runs' }
  | { kind: 'run'; runId: string }
  | { kind: 'rollout'; runId: string; rolloutId: string }
  | { kind: 'compare'; a: string; b: string }
  | { kind: 'unknown'; path: string };

export function basePath(): string {
  return document.body.dataset.base ?? '';
}

const enc = encodeURIComponent;
/** `?a=b` or '' */
const withQuery = (query: string) => (query ? `?${query}` : '');

export const urls = {
  runs: () => `${basePath()}/`,
  run: (runId: string, query = '') => `${basePath()}/runs/${enc(runId)}${withQuery(query)}`,
  rollout: (runId: string, rolloutId: string, query = '') => `${basePath()}/runs/${enc(runId)}/rollouts/${enc(rolloutId)}${withQuery(query)}`,
  compare: (a = '', b = '') => `${basePath()}/compare${a && b ? `?a=${enc(a)}&b=${enc(b)}` : ''}`,
  image: (sha: string) => `${basePath()}/images/${enc(sha)}`,
  apiRuns: () => `${basePath()}/api/runs`,
  apiRun: (runId: string) => `${basePath()}/api/runs/${enc(runId)}`,
  apiRows: (runId: string) => `${basePath()}/api/runs/${enc(runId)}/rows`,
  apiRollout: (runId: string, rolloutId: string) => `${basePath()}/api/runs/${enc(runId)}/rollouts/${enc(rolloutId)}`,
  apiCompare: (a: string, b: string) => `${basePath()}/api/compare?a=${enc(a)}&b=${enc(b)}`,
};

/** Which page the current location is. */
export function currentPage(): Page {
  const base = basePath();
  const full = location.pathname;
  const rest = full.startsWith(base) ? full.slice(base.length) : full;
  const parts = rest.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0) return { kind: 'runs' };
  if (parts.length === 1 && parts[0] === 'compare') {
    const q = new URLSearchParams(location.search);
    return { kind: 'compare', a: q.get('a') ?? '', b: q.get('b') ?? '' };
  }
  if (parts.length === 2 && parts[0] === 'runs') return { kind: 'run', runId: parts[1] };
  if (parts.length === 4 && parts[0] === 'runs' && parts[2] === 'rollouts') return { kind: 'rollout', runId: parts[1], rolloutId: parts[3] };
  return { kind: 'unknown', path: full };
}

export interface RunPayload {
  meta: RunMeta;
  metrics: RunData['metrics'];
  view: RunView;
  /** Published results to show beside the paper table (absent from older servers). */
  published?: PublishedRow[];
}

/** GET a JSON endpoint; throws with the server's error message when it answers an error. */
export async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url, { headers: { accept: 'application/json' } });
  const body = (await res.json().catch(() => null)) as (T & { error?: string }) | null;
  if (!res.ok || body === null) throw new Error(body?.error ?? `${url} answered HTTP ${res.status}`);
  return body;
}

export const api = {
  runs: () => getJson<{ runs: RunListEntry[] }>(urls.apiRuns()),
  run: (runId: string) => getJson<RunPayload>(urls.apiRun(runId)),
  rows: (runId: string) => getJson<{ rows: RunData['rows'] }>(urls.apiRows(runId)),
  rollout: (runId: string, rolloutId: string) => getJson<RolloutData>(urls.apiRollout(runId, rolloutId)),
  compare: (a: string, b: string) => getJson<ComparePayload>(urls.apiCompare(a, b)),
};
