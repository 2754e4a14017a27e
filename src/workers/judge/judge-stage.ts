/**
 * The judge stage: grade an answered rollout. A grading that fails (after the judge's own retries, or
 * a reply without a valid verdict) is not a score: the row is masked as `judge_failed`, rejudgeable.
 */
import type { Judge } from '../../shared/judge.ts';
import type { JudgeJob } from '../../shared/queues.ts';
import { buildRow, type Row, type RowContext } from '../../shared/rows.ts';
import type { RunStore } from '../../shared/run-store.ts';
import type { PreparedTask } from '../../shared/task.ts';

export interface JudgeStageDeps {
  store: RunStore;
  judge: Judge;
}

/** What a judged row needs to know of its run and task. */
export async function judgeRowContext(job: JudgeJob, store: RunStore, judgeModel: string): Promise<RowContext & { task: PreparedTask }> {
  const run = await store.requireRun(job.run_id);
  const task = await store.getTask(job.run_id, job.task_id);
  return { runId: run.run_id, benchmark: run.benchmark, policyModel: run.policy_model, judgeModel, rolloutId: job.rollout_id, repeat: job.repeat, task };
}

/** The masked, rejudgeable row of a grading that failed. */
export async function judgeFailedRow(job: JudgeJob, store: RunStore, judgeModel: string, reason: string): Promise<Row> {
  return buildRow(await judgeRowContext(job, store, judgeModel), job.outcome, { kind: 'masked', failure: 'judge_failed', error: reason });
}

export async function runJudgeStage(job: JudgeJob, deps: JudgeStageDeps, signal?: AbortSignal): Promise<Row> {
  const ctx = await judgeRowContext(job, deps.store, deps.judge.modelName);
  const task = ctx.task;
  const grading = await deps.judge.grade(
    {
      question: task.question,
      expectedAnswer: task.gold,
      extractedAnswer: job.outcome.extracted_answer,
      responseText: job.outcome.response_tail,
    },
    signal,
  );
  if (grading.status === 'failed') return judgeFailedRow(job, deps.store, deps.judge.modelName, grading.reason);
  return buildRow(ctx, job.outcome, { kind: 'scored', verdict: grading.verdict, reason: grading.reason, reward: grading.reward });
}
