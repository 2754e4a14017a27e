/**
 * The most recent runs of a prefix, one summary each: what the run is (benchmark, models, when it
 * was created) and how far it got (rows out of its rollouts, accuracy so far, masked rows). Rows are
 * counted with one HSCAN pass per run (`readRunProgress`); no job queue is read, so it stays cheap.
 */
import { RunStore } from '../shared/stores/run-store.ts';
import { readRunProgress } from './run-progress.ts';

export interface RecentRun {
  run_id: string;
  benchmark: string;
  policy_model: string;
  judge_model: string;
  /** When the run was produced (ISO 8601). */
  created_at: string;
  /** Rollouts in the run (tasks x repeats). */
  total: number;
  /** Rollouts with a row (scored or masked). */
  rows: number;
  scored: number;
  correct: number;
  /** correct / scored; null before the first scored row. */
  accuracy: number | null;
  /** Masked rows (left out of the accuracy), and by failure kind. */
  masked: number;
  masked_by_kind: Record<string, number>;
  output_jsonl_fpath: string;
}

/**
 * The `limit` most recently created runs, newest first, and how many runs the prefix holds. A run id
 * whose record is gone (deleted by hand) is left out.
 */
export async function recentRuns(store: RunStore, limit: number): Promise<{ runs: RecentRun[]; totalRuns: number }> {
  const runs: RecentRun[] = [];
  for (const run of await store.recentRuns(limit)) {
    const p = await readRunProgress(store, run);
    runs.push({
      run_id: run.run_id, benchmark: run.benchmark, policy_model: run.policy_model, judge_model: run.judge_model, created_at: run.created_at,
      total: p.total, rows: p.num_rollouts, scored: p.num_scored, correct: p.num_correct, accuracy: p.accuracy, masked: p.num_masked,
      masked_by_kind: p.masked_by_kind, output_jsonl_fpath: run.output_jsonl_fpath,
    });
  }
  return { runs, totalRuns: await store.countRuns() };
}
