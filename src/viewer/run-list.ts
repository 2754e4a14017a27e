/** A run's line in the viewer's run list, from its rows; shared by every `ViewerSource`. */
import { isScored, type Row } from '../shared/records/rows.ts';
import type { RunListEntry } from './source.ts';

/** Who a run is: from its first row (a file) or its run record (Redis, where a run may have no row yet). */
export type RunIdentity = Pick<RunListEntry, 'run_id' | 'benchmark' | 'policy_model'>;

/** Scored and correct rows (masked rows are not scored) and the latest `finished_at` ('' without rows). */
export function runListEntry(run: RunIdentity, rows: readonly Row[]): RunListEntry {
  const scored = rows.filter(isScored);
  const correct = scored.filter((r) => r.reward === 1).length;
  return {
    run_id: run.run_id,
    benchmark: run.benchmark,
    policy_model: run.policy_model,
    rollouts: rows.length,
    scored: scored.length,
    correct,
    mean_reward: scored.length ? correct / scored.length : null,
    last_finished_at: rows.reduce((latest, r) => (r.finished_at > latest ? r.finished_at : latest), ''),
  };
}
