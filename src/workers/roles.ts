/**
 * Starting the fleet's long-running roles, one way for `vcfleet worker <role>` (one role) and
 * `vcfleet run` (all three in one process): each role is built with its metrics hooks, and its stop
 * is registered with the process's releasers (shared/releasers.ts), so that every step of a stop runs
 * whatever failed before it. This module is not a role: the roles still never import each other.
 */
import type { AgentRunner } from '../shared/agent.ts';
import type { Judge } from '../shared/judge.ts';
import type { Releasers } from '../shared/releasers.ts';
import type { Row } from '../shared/rows.ts';
import type { QueueName } from '../shared/queues.ts';
import type { RoleDeps } from '../shared/stage-worker.ts';
import { publishNotice, type WorkerPresence, type WorkerRole } from '../shared/worker-registry.ts';
import type { FleetMetrics, JobEndHook } from '../shared/telemetry.ts';
import { createFleetJudge } from './judge/judge-factory.ts';
import { startJudgeWorker } from './judge/worker.ts';
import type { CommitResult } from './results/run-output.ts';
import { startResultsWorker, type ResultsWorker } from './results/worker.ts';
import { createAgentRunner } from '../agent/agent-factory.ts';
import { unenforcedNotice } from '../sandboxes/box-check.ts';
import { startSandboxWorker, type SandboxWorker } from './sandbox/worker.ts';
import type { StageWorker } from '../shared/stage-worker.ts';

export { WORKER_ROLES, type WorkerRole } from '../shared/worker-registry.ts';

/** What every role is started with: the stage deps (no metrics hook yet), the metrics, and the worker's record. */
export interface RoleParts extends Omit<RoleDeps<QueueName>, 'onJobEnd'> {
  metrics: FleetMetrics;
  presence: WorkerPresence;
}

/** The sandbox role: `agent` replaces the configured runner (the demo, tests); `onJobEnd` also hears each rollout job's end. */
export async function startSandboxRole(
  parts: RoleParts,
  releasers: Releasers,
  extra: { agent?: AgentRunner; onJobEnd?: JobEndHook } = {},
): Promise<SandboxWorker> {
  parts = { ...parts, logger: parts.logger.child({ role: 'sandbox' }) };
  const { metrics, presence } = parts;
  const runner = extra.agent ?? (await createAgentRunner(parts.config, parts.logger, { onBoxReport: (report) => void publishNotice(presence, unenforcedNotice(report, presence.id)) }));
  const agent = metrics.wrapAgent(runner);
  const rolloutEnd = metrics.jobEnd('rollout');
  try {
    const worker = await startSandboxWorker({
      ...parts, agent, onAdmission: (state) => metrics.admission(state), onPace: (state) => metrics.pace(state),
      onJobEnd: (outcome, ms, err) => {
        rolloutEnd(outcome, ms, err);
        extra.onJobEnd?.(outcome, ms, err);
      },
    });
    releasers.add('stop the sandbox worker', () => worker.close());
    return worker;
  } catch (err) {
    await agent.close();
    throw err;
  }
}

/** The judge role: `judge` replaces the configured judge (the demo, tests). */
export async function startJudgeRole(parts: RoleParts, releasers: Releasers, extra: { judge?: Judge } = {}): Promise<StageWorker<'judge'>> {
  parts = { ...parts, logger: parts.logger.child({ role: 'judge' }) };
  const judge = parts.metrics.wrapJudge(extra.judge ?? createFleetJudge(parts.config, parts.logger, parts.connection));
  const worker = await startJudgeWorker({ ...parts, judge, onJobEnd: parts.metrics.jobEnd('judge') });
  releasers.add('stop the judge worker', () => worker.close());
  return worker;
}

/** The results role: `onCommit` also hears each committed row (the run's tally). */
export function startResultsRole(parts: RoleParts, releasers: Releasers, extra: { onCommit?: (row: Row, result: CommitResult) => void } = {}): ResultsWorker {
  parts = { ...parts, logger: parts.logger.child({ role: 'results' }) };
  const worker = startResultsWorker({
    ...parts, onJobEnd: parts.metrics.jobEnd('results'),
    onCommit: (row, result) => {
      parts.metrics.rowCommitted(row, result);
      extra.onCommit?.(row, result);
    },
  });
  releasers.add('stop the results consumer', () => worker.close());
  return worker;
}

/** Start one role as `vcfleet worker <role>` does. */
export async function startRole(role: WorkerRole, parts: RoleParts, releasers: Releasers): Promise<void> {
  if (role === 'sandbox') await startSandboxRole(parts, releasers);
  else if (role === 'judge') await startJudgeRole(parts, releasers);
  else startResultsRole(parts, releasers);
}
