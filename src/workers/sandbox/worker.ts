/**
 * `vcfleet worker sandbox`: takes rollout jobs (per-process concurrency, fleet-wide cap), runs the
 * agent, and routes the outcome to the judge or straight to the results.
 */
import path from 'node:path';
import type { AgentRunner } from '../../shared/ports/agent.ts';
import { errorMessage, HandBackError } from '../../shared/errors.ts';
import { Releasers } from '../../shared/releasers.ts';
import { enqueue, openQueue } from '../../shared/queue/registry.ts';
import { RunStore } from '../../shared/stores/run-store.ts';
import { startStageWorker, type RoleDeps, type StageWorker } from '../../shared/queue/stage-worker.ts';
import { infraFailedRow, runRolloutStage } from './rollout-stage.ts';
import { RunSettingConflicts } from '../settings-conflicts.ts';
import { MemoryAdmission } from './admission.ts';
import type { AdmissionState } from '../../shared/ports/telemetry.ts';
import type { HostMemory } from './host-memory.ts';
import type { PaceState } from '../../shared/ports/telemetry.ts';
import { PolicyPacing, PolicyWaitExceeded, policyWaitError } from '../../pacing/index.ts';
import { RequestStore } from '../../shared/stores/request-store.ts';
import { CANCELLED_ERROR } from '../../shared/records/request-task.ts';
import type { RolloutJob } from '../../shared/queue/registry.ts';
import { CancelWatch } from './cancel-watch.ts';

export interface SandboxWorkerDeps extends RoleDeps<'rollout'> {
  agent: AgentRunner;
  /** Told whenever the worker's slots or hold change (Prometheus, the progress line). */
  onAdmission?(state: AdmissionState): void;
  /** How the host's memory is read (tests); default /proc and the worker's cgroup. */
  readMemory?: () => Promise<HostMemory>;
  /** Told every second, and whenever its sessions at once change, with the worker's pace against the policy endpoint. */
  onPace?(state: PaceState): void;
}

export type SandboxWorker = StageWorker<'rollout'> & {
  /** Its slots, and whether (and why) it holds off taking rollouts now. */
  admission(): AdmissionState;
  /** Its pace against the policy endpoint: sessions at once now, push-backs, the share of time waiting. */
  pace(): PaceState;
};

export async function startSandboxWorker(deps: SandboxWorkerDeps): Promise<SandboxWorker> {
  const { config, connection, logger } = deps;
  const prefix = config.queues.prefix;
  const scope = deps.scope ?? null;
  // Runs, tasks and images never change once produced: read each once per process.
  const store = new RunStore(connection, prefix, { cache: true });
  const requests = new RequestStore(connection, prefix);
  const judge = openQueue('judge', connection, prefix, { policy: config.queues, scope });
  const results = openQueue('results', connection, prefix, { policy: config.queues, scope });
  const host = {
    policyBaseUrl: config.policy_base_url,
    allowedBaseUrls: config.policy.allowed_base_urls,
    policyApiKey: config.policy_api_key,
    captureRoot: path.resolve(config.state_dir, 'captures'),
  };
  const conflicts = new RunSettingConflicts(config, 'sandbox', logger, deps.agent.host.maxLifetimeS);
  const admission = new MemoryAdmission(config, deps.agent.host.usesHostMemory, logger, deps.onAdmission, deps.readMemory);
  const slots = await admission.slots(config.queues.rollout_concurrency);
  // A lower pace only stops new sessions from starting (BullMQ's concurrency): running ones go on.
  const pacing: PolicyPacing = new PolicyPacing({
    config, redis: connection, logger, cap: slots, workerName: deps.workerName,
    onChange: (state) => {
      if (stage.worker.concurrency !== state.concurrency) stage.worker.concurrency = state.concurrency;
      deps.onPace?.(state);
    },
  });
  const cancels = new CancelWatch({ requests, logger, cancelJob: (id, reason) => stage.worker.cancelJob(id, reason) });
  /** A cancelled request rollout ends with its masked row, not a failure (and never a retry). */
  const endCancelled = async (data: RolloutJob) => {
    await enqueue('results', results, { v: 1, row: await infraFailedRow(data, { store, requests }, CANCELLED_ERROR) });
    logger.info({ rollout_id: data.rollout_id }, 'rollout cancelled');
  };
  const stage = startStageWorker({
    queue: 'rollout',
    connection,
    prefix,
    concurrency: slots,
    lockDurationMs: config.queues.lock_duration_ms,
    name: deps.workerName,
    inFlight: deps.inFlight,
    scope,
    logger,
    onJobEnd: deps.onJobEnd,
    onStall: deps.onStall,
    async handle(data, ctx) {
      // A session that would not fit is not started: the job goes back, and the worker holds off.
      const refusal = await admission.refusal();
      if (refusal !== null) {
        admission.hold(stage.worker, refusal);
        throw new HandBackError(refusal, 2000);
      }
      conflicts.check(await store.requireRun(data.run_id));
      const fromRequest = data.task_source === 'request';
      if (fromRequest && (await requests.isCancelled(data.run_id, data.rollout_id))) {
        admission.sessionEnded();
        return endCancelled(data);
      }
      const watched = fromRequest ? cancels.watch(data.run_id, data.rollout_id) : null;
      let out: Awaited<ReturnType<typeof runRolloutStage>>;
      try {
        out = await runRolloutStage(data, { store, requests, agent: deps.agent, host, pacing: (url, model) => pacing.paceFor(url, model) }, ctx.signal, ctx.attempt)
          .catch(async (err: unknown) => {
            throw err instanceof PolicyWaitExceeded ? await policyWaitError(connection, prefix, data.run_id, data.rollout_id, err) : err;
          })
          .finally(() => admission.sessionEnded());
      } catch (err) {
        if (watched?.cancelled) return endCancelled(data);
        throw err;
      } finally {
        watched?.stop();
      }
      if (out.next === 'judge') {
        await enqueue('judge', judge, out.job);
      } else {
        await enqueue('results', results, { v: 1, row: out.row });
      }
      logger.info({ rollout_id: data.rollout_id, next: out.next }, 'rollout done');
    },
    async onFinalFailure(data, error) {
      const row = await infraFailedRow(data, { store, requests }, errorMessage(error));
      await enqueue('results', results, { v: 1, row });
    },
  });
  // Released newest first, every step whatever failed before it: the runner (and its sandboxes) always.
  const releasers = new Releasers(logger);
  releasers.add('close the agent runner (its sandboxes)', () => deps.agent.close());
  releasers.add('close the judge and results queues', () => Promise.all([judge.close(), results.close()]));
  releasers.add('stop the memory admission', () => admission.stop());
  releasers.add('stop the policy pace', () => pacing.stop());
  releasers.add('stop watching for cancelled rollouts', () => cancels.close());
  let grace: number | undefined;
  releasers.add('stop the rollout worker', () => stage.close(grace));
  return {
    get worker() {
      return stage.worker;
    },
    admission: () => admission.current,
    pace: () => pacing.state,
    close(graceMs) {
      grace = graceMs;
      return releasers.release();
    },
  };
}
