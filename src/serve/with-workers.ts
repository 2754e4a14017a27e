/**
 * `vcfleet serve --with-workers`: this host's sandbox, judge and results roles in the serve process,
 * on the service run's own queues (a one-machine set-up). They are the roles `vcfleet run` starts
 * (all-in-one/run-roles.ts); workers on other hosts may join them (`vcfleet worker <role> --run-id`).
 */
import type { AgentRunner } from '../shared/ports/agent.ts';
import type { Config } from '../shared/config/load.ts';
import type { InFlightJobs } from '../shared/queue/in-flight-jobs.ts';
import type { Judge } from '../shared/ports/judge.ts';
import type { Logger } from '../shared/logger.ts';
import type { Redis } from '../shared/redis/connect.ts';
import { Releasers } from '../shared/releasers.ts';
import { runSettings, type RunRecord } from '../shared/stores/run-store.ts';
import { WORKER_ROLES } from '../shared/queue/worker-registry.ts';
import { startRunRoles } from '../all-in-one/run-roles.ts';

export interface ServeWorkersOptions {
  config: Config;
  logger: Logger;
  /** A worker connection (waits out Redis outages); the caller owns it. */
  connection: Redis;
  run: RunRecord;
  inFlight?: InFlightJobs;
  /** Replace the configured agent or judge (tests). */
  agent?: AgentRunner;
  judge?: Judge;
}

/** Start the roles; returns how to stop them (running rollouts go back to the queue after `graceMs`, attempts kept). */
export async function startServeWorkers(options: ServeWorkersOptions): Promise<{ close(graceMs?: number): Promise<void> }> {
  const { config, logger, connection, run } = options;
  const releasers = new Releasers(logger);
  try {
    // This host's policy endpoint serves the run's model (with token ids when captured) and the judge takes its key, before any request is taken.
    const fleet = await startRunRoles({
      config, logger, connection, releasers, inFlight: options.inFlight, roles: new Set(WORKER_ROLES), scope: run.queue_scope,
      metrics: { own: 'serve' }, preflight: { model: run.policy_model, policy: runSettings(run).policy }, agent: options.agent, judge: options.judge, run: async () => run,
    });
    let grace = 10_000;
    releasers.add('stop the roles', () => fleet.close(grace));
    return {
      close(graceMs = 10_000) {
        grace = graceMs;
        return releasers.release();
      },
    };
  } catch (err) {
    await releasers.release().catch(() => undefined);
    throw err;
  }
}
