/**
 * Who serves a run's queues now: the live workers (worker-registry.ts) of the run's queue scope, by
 * the roles each runs. A `vcfleet worker <role>` serves one role; `vcfleet run` (role `run`) serves
 * all three; a process that finishes requeued work itself announces the roles it started, joined by
 * `+` (`judge+results`). Used to say who picks requeued work up, to decide which roles `retry` and
 * `rejudge` start themselves, and for the dashboard's notice on a run nobody serves.
 */
import type { Redis } from 'ioredis';
import type { RunRecord } from '../shared/stores/run-store.ts';
import { listWorkers, WORKER_ROLES, type WorkerRecord, type WorkerRole } from '../shared/queue/worker-registry.ts';
import { readRunJobs } from '../shared/queue/run-jobs.ts';
import { vcfleetCommand } from '../shared/text/advice.ts';

/** The roles a worker record's role serves. */
export function rolesOf(role: string): WorkerRole[] {
  if (role === 'run') return [...WORKER_ROLES];
  return role.split('+').filter((r): r is WorkerRole => (WORKER_ROLES as readonly string[]).includes(r));
}

/** The presence role of a process that runs `roles` (`run` for all three). */
export function presenceRole(roles: ReadonlySet<WorkerRole>): string {
  return WORKER_ROLES.every((r) => roles.has(r)) ? 'run' : WORKER_ROLES.filter((r) => roles.has(r)).join('+');
}

export interface Serving {
  /** Each role served by at least one live worker of the run's queues, with those workers. */
  byRole: Map<WorkerRole, WorkerRecord[]>;
  /** The live workers of the run's queues. */
  workers: WorkerRecord[];
}

export async function servingOf(redis: Redis, prefix: string, run: Pick<RunRecord, 'queue_scope'>, now = Date.now()): Promise<Serving> {
  const { live } = await listWorkers(redis, prefix, now);
  const workers = live.filter((w) => w.scope === run.queue_scope);
  const byRole = new Map<WorkerRole, WorkerRecord[]>();
  for (const w of workers) for (const role of rolesOf(w.role)) byRole.set(role, [...(byRole.get(role) ?? []), w]);
  return { byRole, workers };
}

/** "2 judge, 1 results (judge@host:…)": who serves, for messages. */
export function describeServing(s: Serving, roles: readonly WorkerRole[]): string {
  return roles.filter((r) => s.byRole.has(r)).map((r) => `${r} by ${s.byRole.get(r)!.map((w) => `${w.host}:${w.pid}`).join(', ')}`).join('; ');
}

/** How to serve a run nobody serves: its own queues are served by `vcfleet run` (or `demo`), the fleet's by workers. */
export function howToServe(run: Pick<RunRecord, 'run_id' | 'queue_scope' | 'origin'>): string {
  if (run.queue_scope === null) return `${vcfleetCommand(`worker ${WORKER_ROLES.join('|')}`)}, or ${vcfleetCommand(`run --run-id ${run.run_id}`)}`;
  if (run.origin === 'serve') return `${vcfleetCommand(`worker ${WORKER_ROLES.join('|')} --run-id ${run.run_id}`)}, or ${vcfleetCommand(`serve --run-id ${run.run_id} --with-workers`)}`;
  return vcfleetCommand(run.origin === 'demo' ? `demo --run-id ${run.run_id}` : `run --run-id ${run.run_id}`);
}

/** Who picks a run's queued work up: the live workers by role, or how to start them. */
export function unservedText(run: Pick<RunRecord, 'run_id' | 'queue_scope' | 'origin'>, s: Serving): string {
  const missing = WORKER_ROLES.filter((r) => !s.byRole.has(r));
  if (missing.length === 0) return `live workers serve it (${describeServing(s, WORKER_ROLES)})`;
  const some = s.workers.length ? `live workers serve only ${describeServing(s, WORKER_ROLES)}; ` : '';
  return `${some}no worker serves ${missing.join(', ')} of this run: start one (${howToServe(run)})`;
}

/**
 * "3 job(s) of this run queued; no worker serves sandbox of this run: start one (…)", when jobs of
 * the run wait and some role has no live worker of its queues (a rollout retried from Bull Board
 * after its `vcfleet run` ended); null when every role is served or nothing waits. The run's waiting
 * jobs are read only then.
 */
export async function unservedNotice(redis: Redis, prefix: string, run: Pick<RunRecord, 'run_id' | 'queue_scope' | 'origin'>): Promise<string | null> {
  const serving = await servingOf(redis, prefix, run);
  if (WORKER_ROLES.every((r) => serving.byRole.has(r))) return null;
  const jobs = (await readRunJobs(redis, prefix, run.run_id, run.queue_scope, ['waiting', 'delayed', 'prioritized', 'active'])).get(run.run_id);
  const queued = jobs ? Object.values(jobs.counts).reduce((n, c) => n + c.waiting + c.delayed + c.prioritized + c.active, 0) : 0;
  return queued > 0 ? `${queued} job(s) of this run queued; ${unservedText(run, serving)}` : null;
}
