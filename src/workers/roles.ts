/**
 * The process side of each stage, by the same names as its data side (`STAGES` in shared/queue/registry.ts):
 * the checks a host passes before the stage's role takes a job, and how the role is built and started,
 * with its metrics hooks, each stop registered with the process's releasers (shared/releasers.ts) so
 * that every step of a stop runs whatever failed before it. process-roles.ts starts them, one way for
 * every process. This module is not a role: the roles still never import each other.
 */
import type { PolicySettings } from '../shared/config/run-settings.ts';
import path from 'node:path';
import type { AgentRunner } from '../shared/ports/agent.ts';
import type { Config } from '../shared/config/load.ts';
import type { Judge } from '../shared/ports/judge.ts';
import type { Logger } from '../shared/logger.ts';
import type { Releasers } from '../shared/releasers.ts';
import type { Row } from '../shared/records/rows.ts';
import type { QueueName } from '../shared/queue/registry.ts';
import type { RoleDeps } from '../shared/queue/stage-worker.ts';
import { publishNotice, type WorkerPresence } from '../shared/queue/worker-registry.ts';
import type { FleetMetrics } from '../shared/ports/telemetry.ts';
import type { JobEndHook } from '../shared/queue/stage-worker.ts';
import { checkJudge, checkOutputFolder, checkPolicy, checkTokenCapture, type PreflightFailure } from '../ops/preflight.ts';
import { checkSplice } from '../ops/splice-check.ts';
import { createFleetJudge } from './judge/judge-factory.ts';
import { resolveJudgeApiKey } from './judge/openai-judge.ts';
import { startJudgeWorker } from './judge/worker.ts';
import type { CommitResult } from './results/run-output.ts';
import { startResultsWorker, type ResultsWorker } from './results/worker.ts';
import { createAgentRunner } from '../agent/index.ts';
import { unenforcedNotice } from '../sandboxes/index.ts';
import { startSandboxWorker, type SandboxWorker } from './sandbox/worker.ts';
import type { StageWorker } from '../shared/queue/stage-worker.ts';

export { WORKER_ROLES, type WorkerRole } from '../shared/queue/worker-registry.ts';

/** What every role is started with: the stage deps (no metrics hook yet), the metrics, and the worker's record. */
export interface RoleParts extends Omit<RoleDeps<QueueName>, 'onJobEnd'> {
  metrics: FleetMetrics;
  presence: WorkerPresence;
}

/** What a process may give its roles beyond the common parts. */
export interface RoleOptions {
  /** Replace the configured agent runner (the demo, tests); the policy endpoint is then not checked. */
  agent?: AgentRunner;
  /** Replace the configured judge (the demo, tests); the judge endpoint is then not checked. */
  judge?: Judge;
  /** Also hears each rollout job's end (the run's policy failures). */
  onRolloutEnd?: JobEndHook;
  /** Also hears each committed row (the run's tally). */
  onCommit?(row: Row, result: CommitResult): void;
}

/** What a role is built with: the process's options, and the logger its judge or agent runner logs with. */
export type PrepareOptions = RoleOptions & { buildLogger: Logger };

/** What a role's preflight checks against. */
export interface PreflightTarget extends Pick<RoleOptions, 'agent' | 'judge'> {
  /** The policy model the run names (the endpoint must serve it); null: only that the endpoint answers (a worker serves any run). */
  model: string | null;
  /** Check the results host's output folder (`vcfleet worker results`; `run` and `serve` never did). */
  outputFolder: boolean;
  /** The run's policy section (its stored settings: token capture is checked at the endpoint as the run asks for it); default this host's. */
  policy?: PolicySettings;
}

/** A started role: whatever else it offers, it stops (running jobs get `graceMs`, then go back to the queue). */
export interface RoleWorker {
  close(graceMs?: number): Promise<void>;
}

export interface StageRole {
  /** This host's checks before the role takes a job: its endpoints, keys and folders (null: nothing to check). */
  preflight(config: Config, target: PreflightTarget): Array<Promise<PreflightFailure | null> | null>;
  /**
   * Build what the role runs with (its agent runner, its sandboxes checked; its judge), each registered
   * to close, and return how to start it. Every role of a process is built before any starts, so a
   * sandbox that cannot hold fails before anything is enqueued.
   */
  prepare(parts: RoleParts, releasers: Releasers, options: PrepareOptions): Promise<() => Promise<RoleWorker>>;
}

/** The sandbox role: runs the agent on each rollout; `onRolloutEnd` also hears each rollout job's end. */
async function prepareSandboxRole(parts: RoleParts, releasers: Releasers, options: PrepareOptions): Promise<() => Promise<SandboxWorker>> {
  const { metrics, presence } = parts;
  const runner = options.agent ?? (await createAgentRunner(parts.config, options.buildLogger, { onBoxReport: (report) => void publishNotice(presence, unenforcedNotice(report, presence.id)) }));
  releasers.add('close the agent runner (its sandboxes)', () => runner.close());
  return async () => {
    const rolloutEnd = metrics.jobEnd('rollout');
    const worker = await startSandboxWorker({
      ...parts, agent: metrics.wrapAgent(runner), onAdmission: (state) => metrics.admission(state), onPace: (state) => metrics.pace(state),
      onJobEnd: (outcome, ms, err) => {
        rolloutEnd(outcome, ms, err);
        options.onRolloutEnd?.(outcome, ms, err);
      },
    });
    releasers.add('stop the sandbox worker', () => worker.close());
    return worker;
  };
}

/** The judge role: grades each answered rollout. */
async function prepareJudgeRole(parts: RoleParts, releasers: Releasers, options: PrepareOptions): Promise<() => Promise<StageWorker<'judge'>>> {
  const judge = options.judge ?? createFleetJudge(parts.config, options.buildLogger, parts.connection);
  releasers.add('close the judge', () => judge.close());
  return async () => {
    const worker = await startJudgeWorker({ ...parts, judge: parts.metrics.wrapJudge(judge), onJobEnd: parts.metrics.jobEnd('judge') });
    releasers.add('stop the judge worker', () => worker.close());
    return worker;
  };
}

/** The results role: writes each row; `onCommit` also hears each committed row. */
async function prepareResultsRole(parts: RoleParts, releasers: Releasers, options: RoleOptions): Promise<() => Promise<ResultsWorker>> {
  return async () => {
    const worker = startResultsWorker({
      ...parts, onJobEnd: parts.metrics.jobEnd('results'),
      onCommit: (row, result) => {
        parts.metrics.rowCommitted(row, result);
        options.onCommit?.(row, result);
      },
    });
    releasers.add('stop the results consumer', () => worker.close());
    return worker;
  };
}

/** Every stage's role, by stage name: a stage missing here is a compile error. */
export const STAGE_ROLES = {
  rollout: {
    preflight: (config, target) => (target.agent || config.agent.kind !== 'opencode' ? [] : [
      checkPolicy(config.policy_base_url, config.policy_api_key, target.model),
      checkTokenCapture(target.policy ?? config.policy, config.policy_base_url, config.policy_api_key, target.model),
      checkSplice(target.policy ?? config.policy, config.policy_base_url, config.policy_api_key, target.model),
    ]),
    prepare: prepareSandboxRole,
  },
  judge: {
    preflight: (config, target) => (target.judge ? [] : [checkJudge(config, resolveJudgeApiKey(config))]),
    prepare: prepareJudgeRole,
  },
  results: {
    preflight: (config, target) => (target.outputFolder ? [checkOutputFolder(path.resolve(config.output_root ?? '.'))] : []),
    prepare: prepareResultsRole,
  },
} satisfies { [N in QueueName]: StageRole };

/** The worker a stage's role starts (`SandboxWorker` for `rollout`). */
export type RoleWorkerOf<N extends QueueName> = Awaited<ReturnType<Awaited<ReturnType<(typeof STAGE_ROLES)[N]['prepare']>>>>;
