/**
 * What a row needs to know of its run and task (rows.ts `RowContext`), made once for every stage
 * that makes rows: the rollout stage (a rollout left unanswered, or whose infrastructure failed), the
 * judge stage (a graded rollout) and `vcfleet serve` (a rollout its client cancelled in the queue).
 */
import type { RequestTask } from '../records/request-task.ts';
import { runSettings, type RunRecord } from './run-record.ts';
import type { RowContext } from '../records/rows.ts';

/** The run's `policy.weight_version`; null when none was set (or its settings cannot be read here). */
function runWeightVersion(run: RunRecord): string | null {
  try {
    return runSettings(run).policy.weight_version;
  } catch {
    return null;
  }
}

/**
 * The context of a rollout's row: the run's identity, the model its request chose (`vcfleet serve`)
 * or the run's, and the judge model of the run's settings.
 */
export function rowContext(
  run: RunRecord, task: RowContext['task'], job: { rollout_id: string; repeat: number }, request: Pick<RequestTask, 'policy'> | null = null,
): RowContext {
  return {
    runId: run.run_id,
    benchmark: run.benchmark,
    policyModel: request?.policy.model ?? run.policy_model,
    weightVersion: request?.policy.weight_version ?? runWeightVersion(run),
    // Read only for a row a judge graded: a row no judge saw (an infrastructure failure) is still made
    // for a run whose settings this vcfleet cannot read, and its error says why.
    get judgeModel() {
      return runSettings(run).visual_coding_opencode_judge_model_name;
    },
    rolloutId: job.rollout_id,
    repeat: job.repeat,
    task,
  };
}
