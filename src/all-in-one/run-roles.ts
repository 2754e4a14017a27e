/**
 * The roles of the fleet in this process, serving one run: the results consumer, the judge-worker
 * and the sandbox-worker on the run's own queues (or the fleet's, for a run made by `produce`), and
 * the run's row tally kept as rows are committed. `retry` and `rejudge` start only the roles no live
 * worker serves; the tally of a run whose rows another process commits is read again from Redis.
 */
import type { AgentRunner } from '../shared/agent.ts';
import type { Config } from '../shared/config.ts';
import type { Judge } from '../shared/judge.ts';
import type { Logger } from '../shared/logger.ts';
import { openQueue } from '../shared/queues.ts';
import type { Redis } from '../shared/redis.ts';
import { RowTally } from '../shared/output/tally.ts';
import { RunStore, type RunRecord } from '../shared/run-store.ts';
import type { FleetMetrics } from '../shared/telemetry.ts';
import type { Releasers } from '../shared/releasers.ts';
import type { WorkerPresence } from '../shared/worker-registry.ts';
import { startJudgeRole, startResultsRole, startSandboxRole, WORKER_ROLES, type WorkerRole } from '../workers/roles.ts';
import type { InFlightJobs } from '../shared/in-flight-jobs.ts';
import { PolicyFailures } from './run-watch.ts';
import type { PaceState } from '../shared/telemetry.ts';

export interface RunRoles {
  tally: RowTally;
  /** Whether this process commits the run's rows (else `refresh` reads them from Redis). */
  commitsRows: boolean;
  /** Read the run's rows into the tally again (when another process commits them; else nothing). */
  refresh(): Promise<void>;
  /** Rollout attempts of this process that failed on the policy server. */
  policyFailures: PolicyFailures;
  /** Why this process takes no rollouts now (its host has no memory to spare), or null. */
  held(): string | null;
  /** This process's pace against the policy endpoint (sessions at once, 429s in the last minute, wait share). */
  pace(): PaceState | null;
  /** Stop taking jobs; jobs still running after `graceMs` go back to the queue, attempts kept. */
  close(graceMs: number): Promise<void>;
}

interface Parts {
  prom: FleetMetrics;
  /** The judge and the agent runner, unwrapped (the roles add the metrics hooks); default the configured ones. */
  judge?: Judge;
  agent?: AgentRunner;
  presence: WorkerPresence;
}

export async function startRoles(
  options: { config: Config; logger: Logger; inFlight?: InFlightJobs },
  connection: Redis,
  run: RunRecord,
  parts: Parts,
  releasers: Releasers,
  roles: ReadonlySet<WorkerRole> = new Set(WORKER_ROLES),
): Promise<RunRoles> {
  const { config, logger } = options;
  const { prom, presence } = parts;
  const scope = run.queue_scope;
  const common = { config, connection, logger, workerName: presence.id, scope, inFlight: options.inFlight, metrics: prom, presence };
  const store = new RunStore(connection, config.queues.prefix);
  const tally = new RowTally();
  const count = async () => {
    for await (const row of store.scanRows(run.run_id)) tally.add(row);
  };
  await count();
  if (scope !== null && roles.has('sandbox')) {
    // A run paused because its policy server was down resumes with the run.
    const rollouts = openQueue('rollout', connection, config.queues.prefix, { scope });
    await rollouts.resume();
    await rollouts.close();
  }
  // The same roles `vcfleet worker` starts (workers/roles.ts), each stop registered as it starts.
  const results = roles.has('results') ? startResultsRole(common, releasers, { onCommit: (row) => row.run_id === run.run_id && tally.add(row) }) : null;
  if (results) {
    await results.ready;
    await results.syncRun(run.run_id);
    // Count again: another consumer may have written rows while this one waited for the writer lock.
    await count();
  }
  const judge = roles.has('judge') ? await startJudgeRole(common, releasers, { judge: parts.judge }) : null;
  const policyFailures = new PolicyFailures();
  const sandbox = roles.has('sandbox')
    ? await startSandboxRole(common, releasers, { agent: parts.agent, onJobEnd: (outcome, _ms, err) => policyFailures.record(outcome, err) })
    : null;
  return {
    tally,
    commitsRows: results !== null,
    refresh: results ? async () => {} : count,
    policyFailures,
    held: () => sandbox?.admission().held ?? null,
    pace: () => sandbox?.pace() ?? null,
    async close(graceMs) {
      // The roles again, newest first, with this grace (their releasers do nothing more then).
      await sandbox?.close(graceMs);
      await judge?.close(graceMs);
      await results?.close(5_000);
    },
  };
}

/** No role in this process: live workers elsewhere serve the run, and its rows are read from Redis. */
export async function noRoles(connection: Redis, prefix: string, run: RunRecord): Promise<RunRoles & { run: RunRecord }> {
  const store = new RunStore(connection, prefix);
  const tally = new RowTally();
  const refresh = async () => {
    for await (const row of store.scanRows(run.run_id)) tally.add(row);
  };
  await refresh();
  return { run, tally, commitsRows: false, refresh, policyFailures: new PolicyFailures(), held: () => null, pace: () => null, close: async () => {} };
}
