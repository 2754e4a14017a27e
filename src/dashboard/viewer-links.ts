/**
 * Where the dashboard links into its rollout viewer (mounted at `viewerPath`, e.g. `/viewer`): a
 * run's page, and a job's rollout page from the job's data as BullMQ holds it (unparsed: a job
 * whose data names no run or rollout gets no link).
 */

const enc = encodeURIComponent;

/** The run and rollout a job names; results jobs carry them in their row. Either is undefined when absent. */
export function jobIds(data: unknown): { run_id?: string; rollout_id?: string } {
  const d = data as { run_id?: unknown; rollout_id?: unknown; row?: { run_id?: unknown; rollout_id?: unknown } } | null;
  const runId = d?.run_id ?? d?.row?.run_id;
  const rolloutId = d?.rollout_id ?? d?.row?.rollout_id;
  return {
    run_id: typeof runId === 'string' && runId ? runId : undefined,
    rollout_id: typeof rolloutId === 'string' && rolloutId ? rolloutId : undefined,
  };
}

/** `<viewerPath>/runs/<run>`, optionally with a table filter query (`masked=infra_failed`). */
export function runPageUrl(viewerPath: string, runId: string, query = ''): string {
  return `${viewerPath}/runs/${enc(runId)}${query ? `?${query}` : ''}`;
}

/** `<viewerPath>/runs/<run>/rollouts/<rollout>`. */
export function rolloutPageUrl(viewerPath: string, runId: string, rolloutId: string): string {
  return `${runPageUrl(viewerPath, runId)}/rollouts/${enc(rolloutId)}`;
}

/** The rollout page of a job, from its data; undefined when the data names no run and rollout. */
export function jobRolloutUrl(viewerPath: string, data: unknown): string | undefined {
  const ids = jobIds(data);
  return ids.run_id && ids.rollout_id ? rolloutPageUrl(viewerPath, ids.run_id, ids.rollout_id) : undefined;
}
