/**
 * The roles of the fleet in this process, serving one run: the results consumer, the judge-worker
 * and the sandbox-worker on the run's own queues (or the fleet's, for a run made by `produce`), and
 * the run's row tally kept as rows are committed. `retry` and `rejudge` start only the roles no live
 * worker serves; the tally of a run whose rows another process commits is read again from Redis.
 */
import { openQueue, QUEUE_NAMES } from '../shared/queue/registry.ts';
import type { Redis } from '../shared/redis/connect.ts';
import { RowTally } from '../shared/output/tally.ts';
import { RunStore, type RunRecord } from '../shared/stores/run-store.ts';
import { startProcessRoles, type ProcessRolesOptions } from '../workers/process-roles.ts';
import { PolicyFailures } from './run-watch.ts';
import type { PaceState } from '../shared/ports/telemetry.ts';

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

export interface RunRolesOptions extends Omit<ProcessRolesOptions, 'worker' | 'beforeStart' | 'afterStart' | 'onCommit' | 'onRolloutEnd'> {
  /** The run served, once the roles are built (`vcfleet run` produces or resumes it then). */
  run(): Promise<RunRecord>;
}

/** Start the roles on one run (process-roles.ts), with the run's tally kept as rows are committed. */
export async function startRunRoles(o: RunRolesOptions): Promise<RunRoles & { run: RunRecord }> {
  const { config, connection } = o;
  const store = new RunStore(connection, config.queues.prefix);
  const tally = new RowTally();
  const policyFailures = new PolicyFailures();
  let run: RunRecord | undefined;
  const count = async () => {
    for await (const row of store.scanRows(run!.run_id)) tally.add(row);
  };
  const { workers } = await startProcessRoles({
    ...o,
    onCommit: (row) => row.run_id === run!.run_id && tally.add(row),
    onRolloutEnd: (outcome, _ms, err) => policyFailures.record(outcome, err),
    async beforeStart() {
      run = await o.run();
      await count();
      if (run.queue_scope !== null && o.roles.has('sandbox')) {
        // A run paused because its policy server was down resumes with the run.
        const rollouts = openQueue('rollout', connection, config.queues.prefix, { scope: run.queue_scope });
        await rollouts.resume();
        await rollouts.close();
      }
    },
    afterStart: {
      async results(results) {
        await results.ready;
        await results.syncRun(run!.run_id);
        // Count again: another consumer may have written rows while this one waited for the writer lock.
        await count();
      },
    },
  });
  const { rollout: sandbox, results } = workers;
  return {
    run: run!,
    tally,
    commitsRows: results !== undefined,
    refresh: results ? async () => {} : count,
    policyFailures,
    held: () => sandbox?.admission().held ?? null,
    pace: () => sandbox?.pace() ?? null,
    async close(graceMs) {
      // The roles again, newest first (upstream first), with this grace (their releasers do nothing more then);
      // the results consumer always gets 5 s to write the rows already made.
      for (const name of QUEUE_NAMES) await workers[name]?.close(name === 'results' ? 5_000 : graceMs);
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
