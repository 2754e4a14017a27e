/**
 * Where the dashboard links into its rollout viewer (mounted at `viewerPath`, e.g. `/viewer`): a
 * run's page, and a job's rollout page from the job's data as BullMQ holds it (unparsed: a job
 * whose data names no run or rollout gets no link).
 */

import { jobRunId } from '../shared/queue/run-jobs.ts';

const enc = encodeURIComponent;

/** `<viewerPath>/runs/<run>`, optionally with a table filter query (`masked=infra_failed`). */
export function runPageUrl(viewerPath: string, runId: string, query = ''): string {
  return `${viewerPath}/runs/${enc(runId)}${query ? `?${query}` : ''}`;
}

/** `<viewerPath>/runs/<run>/rollouts/<rollout>`. */
function rolloutPageUrl(viewerPath: string, runId: string, rolloutId: string): string {
  return `${runPageUrl(viewerPath, runId)}/rollouts/${enc(rolloutId)}`;
}

/** The rollout page of a job, from its data (results jobs carry the ids in their row); undefined when the data names no run and rollout. */
export function jobRolloutUrl(viewerPath: string, data: unknown): string | undefined {
  const d = data as { rollout_id?: unknown; row?: { rollout_id?: unknown } } | null;
  const runId = jobRunId(data);
  const rolloutId = d?.rollout_id ?? d?.row?.rollout_id;
  return runId && typeof rolloutId === 'string' && rolloutId ? rolloutPageUrl(viewerPath, runId, rolloutId) : undefined;
}
