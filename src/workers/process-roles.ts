/**
 * Starting roles of the fleet in a process, one way for `vcfleet worker <role>` (one role),
 * `vcfleet run` (all-in-one/run-roles.ts: every role, or those a retry needs) and `vcfleet serve
 * --with-workers`: the preflight of the roles, the metrics, this process's worker record, each role
 * built (roles.ts), then started downstream first, so no stage's jobs wait on a stage not yet there.
 * Every step is registered with the caller's releasers as it is acquired.
 */
import type { PolicySettings } from '../shared/config/run-settings.ts';
import type { Config } from '../shared/config/load.ts';
import type { Logger } from '../shared/logger.ts';
import { QUEUE_NAMES, STAGES, type QueueName, type QueueScope } from '../shared/queue/registry.ts';
import type { Redis } from '../shared/redis/connect.ts';
import type { Releasers } from '../shared/releasers.ts';
import type { InFlightJobs } from '../shared/queue/in-flight-jobs.ts';
import type { FleetMetrics } from '../shared/ports/telemetry.ts';
import { announceWorker, type WorkerPresence, type WorkerRole } from '../shared/queue/worker-registry.ts';
import { requirePassed, type PreflightFailure } from '../ops/preflight.ts';
import { startRoleMetrics } from '../ops/role-metrics.ts';
import { presenceRole } from '../ops/serving.ts';
import { STAGE_ROLES, type PreflightTarget, type RoleOptions, type RoleParts, type RoleWorker, type RoleWorkerOf } from './roles.ts';

/** The preflight of a process's roles (skipped when `preflight.enabled` is off). */
export interface RolesPreflight {
  /** The policy model the run names (the endpoint must serve it); null: only that the endpoint answers (a worker serves any run). */
  model: string | null;
  /** The run's policy section (its stored settings, token capture checked at the endpoint as the run asks for it); default this host's. */
  policy?: PolicySettings;
  /** The process's own checks, run with the roles' and reported first (`vcfleet run`: Redis persistence). */
  also?: () => Array<Promise<PreflightFailure | null>>;
  /** How the command at hand skips the preflight, named in its failure (default `--skip-preflight`). */
  hint?: string;
}

export interface ProcessRolesOptions extends RoleOptions {
  config: Config;
  logger: Logger;
  /** A worker connection (waits out Redis outages) the roles use; the caller owns it. */
  connection: Redis;
  /** Every step is registered here as it is acquired; the caller releases them. */
  releasers: Releasers;
  roles: ReadonlySet<WorkerRole>;
  /** Whose queues: the fleet's (null) or one run's own; a function is asked after the preflight (`worker --run-id` looks the run up). */
  scope: QueueScope | (() => Promise<QueueScope>);
  /** The process's Prometheus hooks, or `{ own: label }`: start its own (and `/metrics` on `metrics_server.port`) after the preflight. */
  metrics: FleetMetrics | { own: string };
  /** The connection the metrics read queue depths through; default `connection` (`vcfleet run`: its client connection). */
  queueDepthsVia?: Redis;
  preflight: RolesPreflight;
  /** The process's held jobs, handed back when it must exit at once. */
  inFlight?: InFlightJobs;
  /**
   * `vcfleet worker <role>`: the process is that role's worker. Its record is released as "this
   * worker's record", its judge and agent runner log as the role (its `role` field), and the results
   * role checks its output folder. Default: roles beside the process's own work (`run`, `serve`).
   */
  worker?: boolean;
  /** After every role is built and before any starts (`vcfleet run` produces or resumes its run here). */
  beforeStart?(): Promise<void>;
  /** After a stage's role started, before the next starts (`vcfleet run`: the results consumer holds the writer lock). */
  afterStart?: { [N in QueueName]?: (worker: RoleWorkerOf<N>) => Promise<void> };
}

/** The roles started, by stage name. */
export type StartedRoles = { [N in QueueName]?: RoleWorkerOf<N> };

export interface ProcessRoles {
  presence: WorkerPresence;
  metrics: FleetMetrics;
  workers: StartedRoles;
}

/** The stages whose roles are in `roles`, in the order work flows. */
function stagesOf(roles: ReadonlySet<WorkerRole>): QueueName[] {
  return QUEUE_NAMES.filter((name) => roles.has(STAGES[name].role));
}

/** Check this host's endpoints, keys and folders for `roles` (and the process's own checks) before anything is taken or enqueued. */
export async function preflightRoles(config: Config, roles: ReadonlySet<WorkerRole>, preflight: RolesPreflight, target: Omit<PreflightTarget, 'model'>): Promise<void> {
  if (!config.preflight.enabled) return;
  const checks = [...(preflight.also?.() ?? []), ...stagesOf(roles).flatMap((name) => STAGE_ROLES[name].preflight(config, { ...target, model: preflight.model, policy: preflight.policy }))];
  requirePassed(await Promise.all(checks), preflight.hint);
}

/** The process's metrics: given, or its own started now. */
async function metricsOf(o: ProcessRolesOptions): Promise<FleetMetrics> {
  if (!('own' in o.metrics)) return o.metrics;
  const own = await startRoleMetrics(o.config, o.logger, o.metrics.own);
  o.releasers.add('stop the metrics server', () => own.close());
  return own.metrics;
}

/** Preflight, metrics, worker record, then `roles` built and started; returns what was started. */
export async function startProcessRoles(o: ProcessRolesOptions): Promise<ProcessRoles> {
  const { config, logger, connection, releasers } = o;
  const prefix = config.queues.prefix;
  await preflightRoles(config, o.roles, o.preflight, { agent: o.agent, judge: o.judge, outputFolder: o.worker === true });
  const metrics = await metricsOf(o);
  metrics.watchQueues(o.queueDepthsVia ?? connection, prefix);
  const scope = typeof o.scope === 'function' ? await o.scope() : o.scope;
  const presence = await announceWorker(connection, prefix, presenceRole(o.roles), scope);
  releasers.add(o.worker ? "remove this worker's record" : "remove this process's worker record", () => presence.stop());
  // Downstream first: a stage's worker only starts once the stages its jobs go on to are served.
  const stages = stagesOf(o.roles).reverse();
  const starts = new Map<QueueName, () => Promise<RoleWorker>>();
  for (const name of stages) {
    const roleLogger = logger.child({ role: STAGES[name].role });
    const parts: RoleParts = {
      config, logger: roleLogger, connection, workerName: presence.id, scope, inFlight: o.inFlight, metrics, presence,
      onStall: (info) => metrics.stallRecovered(info.queue as QueueName),
    };
    starts.set(name, await STAGE_ROLES[name].prepare(parts, releasers, { ...o, buildLogger: o.worker ? roleLogger : logger }));
  }
  await o.beforeStart?.();
  const workers: Partial<Record<QueueName, RoleWorker>> = {};
  for (const name of stages) {
    const worker = await starts.get(name)!();
    workers[name] = worker;
    await (o.afterStart?.[name] as ((w: RoleWorker) => Promise<void>) | undefined)?.(worker);
  }
  return { presence, metrics, workers: workers as StartedRoles };
}
