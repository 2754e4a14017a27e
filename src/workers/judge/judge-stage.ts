/**
 * The judge stage: grade an answered rollout. A grading that fails (after the judge's own retries, or
 * a reply without a valid verdict) is not a score: the row is masked as `judge_failed`, rejudgeable.
 */
import { InfraError } from '../../shared/errors.ts';
import type { Judge, JudgeInput, RunJudgeSettings } from '../../shared/ports/judge.ts';
import type { JudgeJob } from '../../shared/queue/registry.ts';
import { buildRow, type Row, type RowContext } from '../../shared/records/rows.ts';
import { rowContext } from '../../shared/stores/row-context.ts';
import { runSettings, type RunStore } from '../../shared/stores/run-store.ts';
import type { PreparedTask } from '../../shared/records/task.ts';
import { buildJudgePrompt } from './prompt.ts';
import { rolloutTask, type RequestStore } from '../../shared/stores/request-store.ts';
import { CANCELLED_ERROR } from '../../shared/records/request-task.ts';
import { currentOutcome, gradingPlan } from '../../shared/scoring/rules.ts';

export interface JudgeStageDeps {
  store: Pick<RunStore, 'requireRun' | 'getTask' | 'putTranscriptJudge'>;
  /** The task records (and cancel marks) of `vcfleet serve` rollouts (`task_source: request`). */
  requests?: Pick<RequestStore, 'getTask' | 'isCancelled'>;
  judge: Judge;
}

/** What a judged row needs to know of its run and task (its row's context), and the run's judge settings. */
async function judgeContext(
  job: JudgeJob, store: Pick<RunStore, 'requireRun' | 'getTask'>, requests?: Pick<RequestStore, 'getTask'>,
): Promise<{ row: RowContext; task: PreparedTask; judge: RunJudgeSettings }> {
  const run = await store.requireRun(job.run_id);
  const { task, request } = await rolloutTask(store, requests, job);
  const { visual_coding_opencode_judge_model_name: judgeModel, judge } = runSettings(run);
  return { row: rowContext(run, task, job, request), task, judge: { visual_coding_opencode_judge_model_name: judgeModel, judge } };
}

/** The masked, rejudgeable row of a grading that failed (`unavailable` unless the judge's replies held no verdict). */
export async function judgeFailedRow(
  job: JudgeJob, store: Pick<RunStore, 'requireRun' | 'getTask'>, reason: string, judgeFailure: 'no_verdict' | 'unavailable' = 'unavailable', requests?: Pick<RequestStore, 'getTask'>,
): Promise<Row> {
  return buildRow((await judgeContext(job, store, requests)).row, currentOutcome(job.outcome), { kind: 'masked', failure: 'judge_failed', error: reason, judgeFailure });
}

/** The messages a judge that does not say what it sent would have been sent (judge/prompt.ts). */
function promptOf(input: JudgeInput): { system: string; user: string } {
  const { system, user } = buildJudgePrompt(input);
  return { system, user };
}

export async function runJudgeStage(job: JudgeJob, deps: JudgeStageDeps, signal?: AbortSignal): Promise<Row> {
  const ctx = await judgeContext(job, deps.store, deps.requests);
  // An outcome of older scoring rules (a queued job, a rescore) is graded by today's (scoring/rules.ts).
  const outcome = currentOutcome(job.outcome);
  // A request rollout its client cancelled is not graded: its row says so (masked, never scored).
  if (job.task_source === 'request' && (await deps.requests?.isCancelled(job.run_id, job.rollout_id))) {
    return buildRow(ctx.row, outcome, { kind: 'masked', failure: 'infra_failed', error: CANCELLED_ERROR });
  }
  // Not complete, or no text: 0 without a judge call, whoever sent it here (a rescore sends every row).
  if (gradingPlan(outcome).kind !== 'judge') return buildRow(ctx.row, outcome, { kind: 'unanswered' });
  const task = ctx.task;
  const input: JudgeInput = {
    question: task.question,
    expectedAnswer: task.gold,
    extractedAnswer: outcome.extracted_answer,
    responseText: outcome.response_tail,
    responseTruncated: outcome.response_truncated,
    rolloutId: job.rollout_id,
    // `rejudge --no-cache`: a call to the judge whatever the run's `judge.cache`.
    run: job.no_cache ? { ...ctx.judge, judge: { ...ctx.judge.judge, cache: false } } : ctx.judge,
  };
  const grading = await deps.judge.grade(input, signal);
  // Cut short by the worker stopping: not a grading. The job goes back to the queue, no row is made.
  if (signal?.aborted) throw new InfraError('the grading was aborted (worker shutting down)', { cause: signal.reason });
  // The judge's part of the rollout's transcript: what it was sent (as it says) and what it said.
  const asked = grading.asked ?? { model: ctx.judge.visual_coding_opencode_judge_model_name, prompt: promptOf(input) };
  const scored = grading.status === 'scored';
  await deps.store.putTranscriptJudge(job.run_id, job.rollout_id, {
    model: asked.model, verdict: scored ? grading.verdict : null, reason: grading.reason, prompt: asked.prompt, cached: scored && grading.cached,
  });
  const usage = grading.usage;
  // The row names the judge model its server reported (a local judge may serve another than the run names).
  const row = grading.servedModel ? { ...ctx.row, judgeModel: grading.servedModel } : ctx.row;
  if (grading.status === 'refused') return buildRow(row, outcome, { kind: 'refused', error: grading.reason }, usage);
  if (grading.status === 'failed') return buildRow(row, outcome, { kind: 'masked', failure: 'judge_failed', error: grading.reason, judgeFailure: grading.kind ?? 'unavailable' }, usage);
  return buildRow(row, outcome, { kind: 'scored', verdict: grading.verdict, reason: grading.reason, reward: grading.reward, cached: grading.cached }, usage);
}
