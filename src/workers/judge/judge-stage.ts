/**
 * The judge stage: grade an answered rollout. A grading that fails (after the judge's own retries, or
 * a reply without a valid verdict) is not a score: the row is masked as `judge_failed`, rejudgeable.
 */
import type { Judge } from '../../shared/judge.ts';
import type { JudgeJob } from '../../shared/queues.ts';
import { buildRow, type Row } from '../../shared/rows.ts';
import type { RunStore } from '../../shared/run-store.ts';

export interface JudgeStageDeps {
  store: RunStore;
  judge: Judge;
}

export async function runJudgeStage(job: JudgeJob, deps: JudgeStageDeps, signal?: AbortSignal): Promise<Row> {
  const run = await deps.store.requireRun(job.run_id);
  const task = await deps.store.getTask(job.run_id, job.task_id);
  const ctx = {
    runId: run.run_id,
    benchmark: run.benchmark,
    policyModel: run.policy_model,
    judgeModel: deps.judge.modelName,
    rolloutId: job.rollout_id,
    repeat: job.repeat,
    task,
  };
  const grading = await deps.judge.grade(
    {
      question: task.question,
      expectedAnswer: task.gold,
      extractedAnswer: job.outcome.extracted_answer,
      responseText: job.outcome.response_tail,
    },
    signal,
  );
  if (grading.status === 'failed') {
    return buildRow(ctx, job.outcome, { kind: 'masked', failure: 'judge_failed', error: grading.reason });
  }
  return buildRow(ctx, job.outcome, { kind: 'scored', verdict: grading.verdict, reason: grading.reason, reward: grading.reward });
}
