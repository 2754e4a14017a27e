/**
 * The rollout stage: load the task and its image, run the agent against the policy endpoint this
 * host allows, keep the transcript for the results host, and route the rollout by its summary. A
 * session the model finished with text goes to the judge (an answer extracted or not); one that did
 * not complete, or left no text, gets its row (reward 0) with no judge call (shared/scoring/rules.ts).
 * Infrastructure errors propagate as exceptions so that the adapter retries them.
 */
import path from 'node:path';
import type { AgentResult, AgentRunner, PolicyPace, RolloutPolicy } from '../../shared/ports/agent.ts';
import { InfraError } from '../../shared/errors.ts';
import type { JudgeJob, RolloutJob } from '../../shared/queue/registry.ts';
import { buildRow, type Row } from '../../shared/records/rows.ts';
import { rowContext } from '../../shared/stores/row-context.ts';
import { gradingPlan } from '../../shared/scoring/rules.ts';
import { runSettings, type RunRecord, type RunStore } from '../../shared/stores/run-store.ts';
import { stripCredentials, type RunSettings } from '../../shared/config/run-settings.ts';
import type { PreparedTask } from '../../shared/records/task.ts';
import { rolloutTask, type RequestStore } from '../../shared/stores/request-store.ts';
import { requestImages, type RequestTask } from '../../shared/records/request-task.ts';
import { encodeTranscript } from '../../shared/records/transcript-codec.ts';
import { encodeTrajectory } from '../../shared/records/trajectory-codec.ts';

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
  /** The task records of `vcfleet serve` rollouts (`task_source: request`); without it such a rollout is a poison job. */
  requests?: Pick<RequestStore, 'getTask'>;
  agent: AgentRunner;
  host: SandboxHostSettings;
  /** The pace of calls to an endpoint for a model (pacing/worker-paces.ts); none: unpaced, held up to 600 s. */
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

/** The policy of a rollout: the run's policy section, with what its request chose laid over it (`vcfleet serve`), and this host's endpoint and key. */
export function rolloutPolicy(settings: RunSettings, baseUrl: string, apiKey: string | null, request: RequestTask | null = null): RolloutPolicy {
  const p = settings.policy;
  const asked = request?.policy;
  return {
    settings: { ...p, max_output_tokens: asked?.max_output_tokens ?? p.max_output_tokens, sampling: { ...p.sampling, ...asked?.sampling }, weight_version: asked?.weight_version ?? p.weight_version },
    model: asked?.model ?? settings.policy_model_name,
    baseUrl,
    apiKey,
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

/** The images of a rollout: its request's, or the run's blob of its prepared task. */
async function imagesOf(deps: RolloutStageDeps, task: PreparedTask, request: RequestTask | null) {
  if (request) {
    const [image, ...moreImages] = requestImages(request);
    return { image, moreImages };
  }
  return { image: { bytes: await deps.store.getBlob(task.image_sha256), mime: task.image_mime, sha256: task.image_sha256 }, moreImages: [] };
}

export async function runRolloutStage(job: RolloutJob, deps: RolloutStageDeps, signal: AbortSignal, attempt = 1): Promise<RolloutStageResult> {
  const run = await deps.store.requireRun(job.run_id);
  const settings = runSettings(run);
  const { task, request } = await rolloutTask(deps.store, deps.requests, job);
  const { image, moreImages } = await imagesOf(deps, task, request);
  const baseUrl = choosePolicyEndpoint(run.run_id, request?.policy.base_url ?? settings.policy.endpoint, deps.host);
  const policy = rolloutPolicy(settings, baseUrl, deps.host.policyApiKey, request);
  const pacing = deps.pacing?.(baseUrl, policy.model);
  pacing?.pace.sessionStarted();
  const result = await deps.agent.run(
    {
      runId: run.run_id,
      rolloutId: job.rollout_id,
      repeat: job.repeat,
      task,
      image,
      moreImages,
      policy,
      timeoutS: settings.task_timeout_s,
      agent: settings.agent,
      captureDir: path.join(deps.host.captureRoot, run.run_id),
      transcript: { enabled: settings.transcripts.enabled, imageBudgetBytes: settings.transcripts.max_image_mib * 1024 * 1024 },
      attempt,
      pacing,
    },
    signal,
  ).finally(() => pacing?.pace.sessionEnded());
  // A request's images are no run blob: the transcript keeps them all.
  const puzzleSha = request ? '' : task.image_sha256;
  await keepTranscript(deps, run, job, result, puzzleSha);
  await keepTrajectory(deps, run, job, result, puzzleSha);
  const { outcome } = result;
  await deps.store.putOutcome(run.run_id, job.rollout_id, outcome);
  // A finished run with text goes to the judge, answer extracted or not; the rest score 0 without a call (scoring/rules.ts).
  if (gradingPlan(outcome).kind === 'judge') {
    const judge: JudgeJob = { v: 1, run_id: run.run_id, task_id: task.task_id, repeat: job.repeat, rollout_id: job.rollout_id, outcome };
    if (job.task_source) judge.task_source = job.task_source;
    return { next: 'judge', job: judge };
  }
  return { next: 'results', row: buildRow(rowContext(run, task, job, request), outcome, { kind: 'unanswered' }) };
}

/** The masked row of a rollout whose infrastructure failed on its last attempt (or that its client cancelled: `error` says so). */
export async function infraFailedRow(job: RolloutJob, stores: Pick<RolloutStageDeps, 'store' | 'requests'>, error: string): Promise<Row> {
  const run = await stores.store.requireRun(job.run_id);
  const { task, request } = await rolloutTask(stores.store, stores.requests, job);
  return buildRow(rowContext(run, task, job, request), null, { kind: 'masked', failure: 'infra_failed', error });
}
