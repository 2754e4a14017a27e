/**
 * The rollout stage: load the task and its image, run the agent against the policy endpoint this
 * host allows, keep the transcript for the results host, and route the rollout by its summary. A final answer goes
 * to the judge; a model that stopped without one gets its row (reward 0) with no judge call.
 * Infrastructure errors propagate as exceptions so that the adapter retries them.
 */
import path from 'node:path';
import type { AgentResult, AgentRunner, PolicyEndpoint, PolicyPace } from '../../shared/agent.ts';
import { InfraError } from '../../shared/errors.ts';
import type { JudgeJob, RolloutJob } from '../../shared/queues.ts';
import { buildRow, type Row, type RowContext } from '../../shared/rows.ts';
import { runSettings, type RunRecord, type RunStore } from '../../shared/run-store.ts';
import { stripCredentials, type RunSettings } from '../../shared/run-settings.ts';
import type { PreparedTask } from '../../shared/task.ts';
import { encodeTranscript } from '../../shared/transcript-codec.ts';
import { encodeTrajectory } from '../../shared/trajectory-codec.ts';

/** What this host decides, whatever a run record says. */
export interface SandboxHostSettings {
  /** The policy endpoint of this host (`policy_base_url`, `POLICY_BASE_URL`). */
  policyBaseUrl: string;
  /** Other endpoints this host may send its key to (`policy.allowed_base_urls`). */
  allowedBaseUrls: readonly string[];
  /** The policy key of this host (never stored in Redis). */
  policyApiKey: string | null;
  /** Folder for `policy.capture` files on this host; one subfolder per run. */
  captureRoot: string;
}

/** The pace of one endpoint's calls, as the stage uses it: handed to the rollout, told when its session runs. */
export interface SessionPace extends PolicyPace {
  sessionStarted(): void;
  sessionEnded(): void;
}

export interface RolloutStageDeps {
  store: Pick<RunStore, 'requireRun' | 'getTask' | 'getBlob' | 'putOutcome' | 'putTranscript' | 'putTrajectory'>;
  agent: AgentRunner;
  host: SandboxHostSettings;
  /** The pace of calls to an endpoint for a model (pacing/policy-pacing.ts); none: unpaced, held up to 600 s. */
  pacing?: (baseUrl: string, model: string) => { pace: SessionPace; maxWaitS: number };
}

export type RolloutStageResult = { next: 'judge'; job: JudgeJob } | { next: 'results'; row: Row };

const normal = (url: string) => url.replace(/\/+$/, '');

/**
 * The endpoint that receives this host's key: its own, unless the run names another that this
 * host allows. Anything else fails the rollout, naming both, and the key goes nowhere.
 */
export function choosePolicyEndpoint(runId: string, asked: string | null, host: SandboxHostSettings): string {
  if (asked === null || normal(asked) === normal(stripCredentials(host.policyBaseUrl))) return host.policyBaseUrl;
  const allowed = host.allowedBaseUrls.find((u) => normal(stripCredentials(u)) === normal(asked));
  if (allowed) return allowed;
  throw new InfraError(
    `run ${runId} asks for the policy endpoint ${asked}, but this worker sends its key only to ${stripCredentials(host.policyBaseUrl)}` +
      `${host.allowedBaseUrls.length ? ` and ${host.allowedBaseUrls.map(stripCredentials).join(', ')}` : ''}: add it to policy.allowed_base_urls on this worker, or run the rollouts on a worker that serves it`,
  );
}

export function policyEndpoint(settings: RunSettings, baseUrl: string, apiKey: string | null): PolicyEndpoint {
  const p = settings.policy;
  return {
    baseUrl, apiKey, modelName: p.model_name, contextWindow: p.context_window, maxOutputTokens: p.max_output_tokens,
    requestTimeoutS: p.request_timeout_s, capture: p.capture, maxRequestBytes: p.max_request_mib * 1024 * 1024,
    maxConcurrentCalls: p.max_concurrent_calls, maxCallsPerRollout: p.max_calls_per_rollout,
    tokenCapture: p.token_capture, sampling: p.sampling, weightVersion: p.weight_version,
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

/** The transcript goes to Redis, for the results host to write (the puzzle is a run blob already). */
async function keepTranscript(deps: RolloutStageDeps, run: RunRecord, job: RolloutJob, result: AgentResult, puzzleSha: string): Promise<void> {
  if (!result.transcript) return;
  const images = new Map<string, Buffer>();
  for (const [sha, img] of result.transcript.images) if (sha !== puzzleSha) images.set(sha, img.bytes);
  await deps.store.putTranscript(run.run_id, job.rollout_id, encodeTranscript(result.transcript.record), images);
}

/** The trajectory goes to Redis beside the transcript, for the results host to write (only once the rollout finished). */
async function keepTrajectory(deps: RolloutStageDeps, run: RunRecord, job: RolloutJob, result: AgentResult, puzzleSha: string): Promise<void> {
  if (!result.trajectory) return;
  const images = new Map<string, Buffer>();
  for (const [sha, img] of result.trajectory.images) if (sha !== puzzleSha) images.set(sha, img.bytes);
  await deps.store.putTrajectory(run.run_id, job.rollout_id, encodeTrajectory(result.trajectory.record), images);
}

export async function runRolloutStage(job: RolloutJob, deps: RolloutStageDeps, signal: AbortSignal, attempt = 1): Promise<RolloutStageResult> {
  const run = await deps.store.requireRun(job.run_id);
  const settings = runSettings(run);
  const task = await deps.store.getTask(job.run_id, job.task_id);
  const bytes = await deps.store.getBlob(task.image_sha256);
  const baseUrl = choosePolicyEndpoint(run.run_id, settings.policy.endpoint, deps.host);
  const pacing = deps.pacing?.(baseUrl, settings.policy.model_name);
  pacing?.pace.sessionStarted();
  const result = await deps.agent.run(
    {
      runId: run.run_id,
      rolloutId: job.rollout_id,
      repeat: job.repeat,
      task,
      image: { bytes, mime: task.image_mime, sha256: task.image_sha256 },
      policy: policyEndpoint(settings, baseUrl, deps.host.policyApiKey),
      timeoutS: settings.task_timeout_s,
      maxToolCalls: settings.agent.max_tool_calls,
      captureDir: path.join(deps.host.captureRoot, run.run_id),
      transcript: { enabled: settings.transcripts.enabled, imageBudgetBytes: settings.transcripts.max_image_mib * 1024 * 1024 },
      attempt,
      pacing,
    },
    signal,
  ).finally(() => pacing?.pace.sessionEnded());
  await keepTranscript(deps, run, job, result, task.image_sha256);
  await keepTrajectory(deps, run, job, result, task.image_sha256);
  const { outcome } = result;
  await deps.store.putOutcome(run.run_id, job.rollout_id, outcome);
  if (outcome.stop_reason === 'answered' && outcome.extracted_answer !== null) {
    return { next: 'judge', job: { v: 1, run_id: run.run_id, task_id: task.task_id, repeat: job.repeat, rollout_id: job.rollout_id, outcome } };
  }
  return { next: 'results', row: buildRow(rowContext(run, task, job), outcome, { kind: 'unanswered' }) };
}

/** The masked row of a rollout whose infrastructure failed on its last attempt. */
export async function infraFailedRow(job: RolloutJob, store: Pick<RunStore, 'requireRun' | 'getTask'>, error: string): Promise<Row> {
  const run = await store.requireRun(job.run_id);
  const task = await store.getTask(job.run_id, job.task_id);
  return buildRow(rowContext(run, task, job), null, { kind: 'masked', failure: 'infra_failed', error });
}
