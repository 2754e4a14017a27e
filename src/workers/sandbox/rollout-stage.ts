/**
 * The rollout stage: load the task and its image, run the agent, and route the outcome. A final answer
 * goes to the judge; a model that stopped without one gets its row (reward 0) with no judge call.
 * Infrastructure errors propagate as exceptions so that the adapter retries them.
 */
import path from 'node:path';
import type { AgentResult, AgentRunner, PolicyEndpoint } from '../../shared/agent.ts';
import type { Config } from '../../shared/config.ts';
import type { AgentOutcome, JudgeJob, RolloutJob } from '../../shared/queues.ts';
import { buildRow, type Row, type RowContext } from '../../shared/rows.ts';
import type { RunRecord, RunStore } from '../../shared/run-store.ts';
import type { PreparedTask } from '../../shared/task.ts';

/** The judge sees at most this much of the end of the model's text. */
export const RESPONSE_TAIL_CHARS = 4000;

export interface RolloutStageDeps {
  store: RunStore;
  agent: AgentRunner;
  /** The policy key of this worker's host (never stored in Redis). */
  policyApiKey: string | null;
}

export type RolloutStageResult = { next: 'judge'; job: JudgeJob } | { next: 'results'; row: Row };

export function transcriptDirFor(outputJsonl: string): string {
  const stem = path.basename(outputJsonl).replace(/\.jsonl$/, '');
  return path.resolve(path.dirname(outputJsonl), `${stem}_transcripts`);
}

export function policyEndpoint(run: RunRecord, apiKey: string | null): PolicyEndpoint {
  const cfg = run.config as unknown as Config;
  return {
    baseUrl: cfg.policy_base_url,
    apiKey,
    modelName: cfg.policy_model_name,
    contextWindow: cfg.policy.context_window,
    maxOutputTokens: cfg.policy.max_output_tokens,
    requestTimeoutS: cfg.policy.request_timeout_s,
    capture: cfg.policy.capture,
  };
}

export function rowContext(run: RunRecord, task: PreparedTask, job: Pick<RolloutJob, 'rollout_id' | 'repeat'>): RowContext {
  return {
    runId: run.run_id,
    benchmark: run.benchmark,
    policyModel: run.policy_model,
    judgeModel: run.judge_model,
    rolloutId: job.rollout_id,
    repeat: job.repeat,
    task,
  };
}

export function toOutcome(result: AgentResult): AgentOutcome {
  return {
    stop_reason: result.stopReason,
    extracted_answer: result.extractedAnswer,
    response_tail: result.responseText.slice(-RESPONSE_TAIL_CHARS),
    turns: result.turns,
    tool_calls: result.toolCalls,
    input_tokens: result.inputTokens,
    output_tokens: result.outputTokens,
    wall_s: result.wallS,
    error: result.error ?? null,
  };
}

export async function runRolloutStage(
  job: RolloutJob,
  deps: RolloutStageDeps,
  signal: AbortSignal,
  attempt = 1,
): Promise<RolloutStageResult> {
  const run = await deps.store.requireRun(job.run_id);
  const task = await deps.store.getTask(job.run_id, job.task_id);
  const bytes = await deps.store.getBlob(task.image_sha256);
  const cfg = run.config as unknown as Config;
  const result = await deps.agent.run(
    {
      runId: run.run_id,
      rolloutId: job.rollout_id,
      repeat: job.repeat,
      task,
      image: { bytes, mime: task.image_mime, sha256: task.image_sha256 },
      policy: policyEndpoint(run, deps.policyApiKey),
      timeoutS: cfg.task_timeout_s,
      transcriptDir: transcriptDirFor(run.output_jsonl_fpath),
      attempt,
    },
    signal,
  );
  const outcome = toOutcome(result);
  await deps.store.putOutcome(run.run_id, job.rollout_id, outcome);
  if (outcome.stop_reason === 'answered' && outcome.extracted_answer !== null) {
    return { next: 'judge', job: { v: 1, run_id: run.run_id, task_id: task.task_id, repeat: job.repeat, rollout_id: job.rollout_id, outcome } };
  }
  return { next: 'results', row: buildRow(rowContext(run, task, job), outcome, { kind: 'unanswered' }) };
}

/** The masked row of a rollout whose infrastructure failed on its last attempt. */
export async function infraFailedRow(job: RolloutJob, store: RunStore, error: string): Promise<Row> {
  const run = await store.requireRun(job.run_id);
  const task = await store.getTask(job.run_id, job.task_id);
  return buildRow(rowContext(run, task, job), null, { kind: 'masked', failure: 'infra_failed', error });
}
