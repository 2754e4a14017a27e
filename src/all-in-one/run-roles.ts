/**
 * Every role of the fleet in this process, serving one run: the results consumer, the judge-worker
 * and the sandbox-worker on the run's own queues (or the fleet's, for a run made by `produce`), and
 * the run's row tally kept as rows are committed.
 */
import type { AgentRunner } from '../shared/agent.ts';
import type { Config } from '../shared/config.ts';
import type { Judge } from '../shared/judge.ts';
import type { Logger } from '../shared/logger.ts';
import { openQueue } from '../shared/queues.ts';
import type { Redis } from '../shared/redis.ts';
import { RowTally } from '../shared/output/tally.ts';
import { RunStore, type RunRecord } from '../shared/run-store.ts';
import type { FleetMetrics } from '../ops/prom-metrics.ts';
import { startJudgeWorker } from '../workers/judge/worker.ts';
import { startResultsWorker } from '../workers/results/worker.ts';
import { startSandboxWorker } from '../workers/sandbox/worker.ts';
import type { InFlightJobs } from '../shared/in-flight-jobs.ts';
import { PolicyFailures } from './run-watch.ts';

export interface RunRoles {
  tally: RowTally;
  /** Rollout attempts of this process that failed on the policy server. */
  policyFailures: PolicyFailures;
  /** Why this process takes no rollouts now (its host has no memory to spare), or null. */
  held(): string | null;
  /** Stop taking jobs; jobs still running after `graceMs` go back to the queue, attempts kept. */
  close(graceMs: number): Promise<void>;
}

interface Parts {
  prom: FleetMetrics;
  judge: Judge;
  agent: AgentRunner;
  workerName: string;
}

interface Registry {
  add(close: () => Promise<unknown>): void;
}

export async function startRoles(options: { config: Config; logger: Logger; inFlight?: InFlightJobs }, connection: Redis, run: RunRecord, parts: Parts, closers: Registry): Promise<RunRoles> {
  const { config, logger } = options;
  const { prom, workerName } = parts;
  const scope = run.queue_scope;
  const common = { config, connection, logger, workerName, scope, inFlight: options.inFlight };
  const store = new RunStore(connection, config.queues.prefix);
  const tally = new RowTally();
  const count = async () => {
    for await (const row of store.scanRows(run.run_id)) tally.add(row);
  };
  await count();
  if (scope !== null) {
    // A run paused because its policy server was down resumes with the run.
    const rollouts = openQueue('rollout', connection, config.queues.prefix, { scope });
    await rollouts.resume();
    await rollouts.close();
  }
  const results = startResultsWorker({
    ...common, onJobEnd: prom.jobEnd('results'),
    onCommit: (row, result) => {
      prom.rowCommitted(row, result);
      if (row.run_id === run.run_id) tally.add(row);
    },
  });
  closers.add(() => results.close());
  await results.ready;
  await results.syncRun(run.run_id);
  // Count again: another consumer may have written rows while this one waited for the writer lock.
  await count();
  const judge = await startJudgeWorker({ ...common, judge: parts.judge, onJobEnd: prom.jobEnd('judge') });
  closers.add(() => judge.close());
  const policyFailures = new PolicyFailures();
  const rolloutEnd = prom.jobEnd('rollout');
  const sandbox = await startSandboxWorker({
    ...common, agent: parts.agent, onAdmission: (state) => prom.admission(state),
    onJobEnd: (outcome, ms, err) => {
      rolloutEnd(outcome, ms, err);
      policyFailures.record(outcome, err);
    },
  });
  closers.add(() => sandbox.close());
  return {
    tally,
    policyFailures,
    held: () => sandbox.admission().held,
    async close(graceMs) {
      await sandbox.close(graceMs);
      await judge.close(graceMs);
      await results.close(5_000);
    },
  };
}
