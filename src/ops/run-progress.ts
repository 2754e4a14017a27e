/**
 * The summary of a run that `vcfleet runs`, `vcfleet status` and the dashboard's overview show: rows
 * done out of its rollouts, scored and correct rows, accuracy so far, masked rows (in all and by
 * kind), stop reasons, and a status word. `runProgress` makes it from a tally of the rows (pure);
 * `readRunProgress` tallies a run's rows in Redis (one HSCAN pass) and makes it.
 */
import { accuracyOf, RowTally, type TallyCounts } from '../shared/output/tally.ts';
import type { RunRecord, RunStore } from '../shared/stores/run-store.ts';
import type { PaperTable } from '../shared/output/paper-table.ts';

/** `failed`: every rollout has a row and none was scored (all masked); `complete`: with scores; else `running`. */
export type RunState = 'running' | 'complete' | 'failed';

/** A run that ended without a single score failed, whatever its row count says. */
export function runState(done: number, total: number, scored: number): RunState {
  if (done < total) return 'running';
  return done > 0 && scored === 0 ? 'failed' : 'complete';
}

export interface RunProgress extends TallyCounts {
  /** Rollouts in the run (tasks x repeats; a serve run's: those it accepted so far). */
  total: number;
  /** correct / scored; null before the first scored row. */
  accuracy: number | null;
  /** Every rollout has a row (scored or masked). */
  complete: boolean;
  state: RunState;
  /** The paper's table of the rows so far (mean ± std over passes); only when read from the rows (`readRunProgress`). */
  paper?: PaperTable;
}

/** The summary of a run of `total` rollouts from the tally of its rows. */
export function runProgress(counts: TallyCounts, total: number): RunProgress {
  return { ...counts, total, accuracy: accuracyOf(counts), complete: counts.num_rollouts >= total, state: runState(counts.num_rollouts, total, counts.num_scored) };
}

/** The summary of a run from its rows in Redis (one HSCAN pass; no job queue is read). */
export async function readRunProgress(store: RunStore, run: RunRecord): Promise<RunProgress> {
  const tally = new RowTally();
  for await (const row of store.scanRows(run.run_id)) tally.add(row);
  return { ...runProgress(tally.counts, await store.totalOf(run)), paper: tally.metrics.result(run.num_repeats).paper };
}
