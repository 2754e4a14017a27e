/**
 * Who serves the fleet: every long-running role writes a heartbeat record to one Redis hash of its
 * prefix (host, pid, role, start, last seen, and notices such as "sandbox limits not enforced"), and
 * removes it when it stops cleanly. `vcfleet status` reads it to show the live workers, the ones that
 * stopped heartbeating (and the jobs they held: each BullMQ worker is named by its record's id, so a
 * job's `processedBy` names it), and every notice. A record older than `STALE_AFTER_MS` is a dead worker.
 */
import os from 'node:os';
import { settleWithin } from '../settle-within.ts';
import { z } from 'zod';
import type { Redis } from 'ioredis';
import { QUEUE_NAMES, STAGES, type QueueName } from './registry.ts';

/** The roles `vcfleet worker <role>` accepts: one per stage (registry.ts), in the order work flows. */
export type WorkerRole = (typeof STAGES)[QueueName]['role'];
export const WORKER_ROLES: readonly WorkerRole[] = QUEUE_NAMES.map((name) => STAGES[name].role);

/** The stage role `role` serves. */
export function stageOf(role: WorkerRole): QueueName {
  return QUEUE_NAMES.find((name) => STAGES[name].role === role)!;
}

export const HEARTBEAT_MS = 10_000;
/** A worker whose last heartbeat is older than this is taken for dead. */
export const STALE_AFTER_MS = 45_000;
/** The record of a dead worker is dropped after this long (its jobs were long since taken over). */
const FORGET_AFTER_MS = 24 * 60 * 60 * 1000;

export const WorkerRecordSchema = z.object({
  id: z.string(),
  role: z.string(),
  host: z.string(),
  pid: z.number().int(),
  started_at: z.string(),
  last_seen: z.number(),
  /** Things an operator must know about this worker (repeated by `vcfleet status`). */
  notices: z.array(z.string()).default([]),
  /** Whose queues it serves: the fleet's (null) or one run's own (its run id). */
  scope: z.string().nullable().default(null),
});
export type WorkerRecord = z.infer<typeof WorkerRecordSchema>;

export function workersKey(prefix: string): string {
  return `${prefix}:workers`;
}

/** The id of this process as a worker of `role`: host, pid and start, so a reused pid is another id. */
export function workerId(role: string): string {
  return `${role}@${os.hostname()}:${process.pid}:${Date.now().toString(36)}`;
}

export interface WorkerPresence {
  readonly id: string;
  /** Add a notice (kept until the worker stops). */
  notice(text: string): Promise<void>;
  /** Stop the heartbeat and remove the record. Safe to call twice. */
  stop(): Promise<void>;
}

/** Announce this process as a worker of `role` and keep its heartbeat until `stop()`. */
export async function announceWorker(redis: Redis, prefix: string, role: string, scope: string | null = null, id = workerId(role)): Promise<WorkerPresence> {
  const record: WorkerRecord = { id, role, host: os.hostname(), pid: process.pid, started_at: new Date().toISOString(), last_seen: Date.now(), notices: [], scope };
  const write = () => redis.hset(workersKey(prefix), id, JSON.stringify({ ...record, last_seen: Date.now() }));
  await write();
  const timer = setInterval(() => void write().catch(() => undefined), HEARTBEAT_MS);
  timer.unref();
  let stopping: Promise<void> | null = null;
  return {
    id,
    async notice(text) {
      if (!record.notices.includes(text)) record.notices.push(text);
      await write();
    },
    stop() {
      stopping ??= (async () => {
        clearInterval(timer);
        // With Redis away the command would wait for it for ever: a record that stays ages into "stale".
        const removed = redis.hdel(workersKey(prefix), id).catch(() => undefined);
        await settleWithin(removed, 1000);
      })();
      return stopping;
    },
  };
}

/** Add a notice when there is one; a failed write only loses the notice. */
export async function publishNotice(presence: WorkerPresence, text: string | null): Promise<void> {
  if (text) await presence.notice(text).catch(() => undefined);
}

export interface WorkerList {
  live: WorkerRecord[];
  /** Workers that stopped heartbeating without removing their record (killed, host down). */
  stale: WorkerRecord[];
}

function parseRecord(raw: string): WorkerRecord | null {
  try {
    const parsed = WorkerRecordSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** Every worker record of the prefix, split into live and stale (records of workers dead for a day are dropped). */
export async function listWorkers(redis: Redis, prefix: string, now = Date.now()): Promise<WorkerList> {
  const all = await redis.hgetall(workersKey(prefix));
  const out: WorkerList = { live: [], stale: [] };
  const forget: string[] = [];
  for (const [id, raw] of Object.entries(all)) {
    const record = parseRecord(raw);
    if (!record || now - record.last_seen > FORGET_AFTER_MS) forget.push(id);
    else (now - record.last_seen > STALE_AFTER_MS ? out.stale : out.live).push(record);
  }
  if (forget.length) await redis.hdel(workersKey(prefix), ...forget);
  const byStart = (a: WorkerRecord, b: WorkerRecord) => a.started_at.localeCompare(b.started_at);
  out.live.sort(byStart);
  out.stale.sort(byStart);
  return out;
}
