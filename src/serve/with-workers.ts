/**
 * `vcfleet serve --with-workers`: this host's sandbox, judge and results roles in the serve process,
 * on the service run's own queues (a one-machine set-up). They are the roles `vcfleet run` starts
 * (all-in-one/run-roles.ts); workers on other hosts may join them (`vcfleet worker <role> --run-id`).
 */
import type { AgentRunner } from '../shared/agent.ts';
import type { Config } from '../shared/config.ts';
import type { InFlightJobs } from '../shared/in-flight-jobs.ts';
import type { Judge } from '../shared/judge.ts';
import type { Logger } from '../shared/logger.ts';
import type { Redis } from '../shared/redis.ts';
import { Releasers } from '../shared/releasers.ts';
import type { RunRecord } from '../shared/run-store.ts';
import { announceWorker, publishNotice } from '../shared/worker-registry.ts';
import { startRoles } from '../all-in-one/run-roles.ts';
import { startRoleMetrics } from '../ops/role-metrics.ts';
import { presenceRole } from '../ops/serving.ts';
import { createFleetJudge } from '../workers/judge/judge-factory.ts';
import { createAgentRunner } from '../agent/agent-factory.ts';
import { unenforcedNotice } from '../sandboxes/box-check.ts';
import { WORKER_ROLES } from '../workers/roles.ts';
import { checkJudge, checkPolicy, checkTokenCapture, requirePassed } from '../ops/preflight.ts';
import { resolveJudgeApiKey } from '../workers/judge/openai-judge.ts';

/** This host's policy endpoint serves the model (with token ids when captured) and the judge takes its key, before any request is taken. */
async function preflight(options: ServeWorkersOptions): Promise<void> {
  const { config } = options;
  if (!config.preflight.enabled) return;
  const checks = [];
  if (!options.agent && config.agent.kind === 'opencode') {
    checks.push(checkPolicy(config.policy_base_url, config.policy_api_key, options.run.policy_model));
    if (config.policy.token_capture) checks.push(checkTokenCapture(config.policy_base_url, config.policy_api_key, options.run.policy_model));
  }
  if (!options.judge) checks.push(checkJudge(config, resolveJudgeApiKey(config)));
  requirePassed(await Promise.all(checks));
}

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
  await preflight(options);
  const releasers = new Releasers(logger);
  try {
    const roleMetrics = await startRoleMetrics(config, logger, 'serve');
    releasers.add('stop the metrics server', () => roleMetrics.close());
    roleMetrics.metrics.watchQueues(connection, config.queues.prefix);
    const roles = new Set(WORKER_ROLES);
    const presence = await announceWorker(connection, config.queues.prefix, presenceRole(roles), run.queue_scope);
    releasers.add("remove this process's worker record", () => presence.stop());
    const judge = options.judge ?? createFleetJudge(config, logger, connection);
    releasers.add('close the judge', () => judge.close());
    const agent = options.agent ?? (await createAgentRunner(config, logger, { onBoxReport: (r) => void publishNotice(presence, unenforcedNotice(r, presence.id)) }));
    releasers.add('close the agent runner (its sandboxes)', () => agent.close());
    const fleet = await startRoles({ config, logger, inFlight: options.inFlight }, connection, run, { prom: roleMetrics.metrics, judge, agent, presence }, releasers, roles);
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
