/**
 * The fleet's record of stalled workers recovered by their queue watchdog (watchdog.ts): per
 * queue, how many recoveries and the last one (when, which worker, how many jobs waited). Written by
 * every role, shown by `vcfleet status`.
 */
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { fleetKeys } from '../redis/keys.ts';

const LastStallSchema = z.object({
  at: z.string().max(64), worker: z.string().max(300).nullable(), waiting: z.number(), stalled_s: z.number(),
  /** The blocking client's ioredis status and its known Cluster nodes at the recovery (absent in older records). */
  blocking_status: z.string().max(64).nullable().optional(),
  blocking_nodes: z.number().nullable().optional(),
});

export interface QueueStalls {
  queue: string;
  /** Stalled workers of this queue recovered, fleet-wide. */
  recovered: number;
  last: z.infer<typeof LastStallSchema> | null;
}

/** Count one recovery of a worker of `queue` (best effort: a lost write costs only the count). */
export async function recordStall(redis: Redis, prefix: string, queue: string, last: z.infer<typeof LastStallSchema>): Promise<void> {
  const key = fleetKeys(prefix).watchdog();
  await redis.hincrby(key, `${queue}:recovered`, 1);
  await redis.hset(key, `${queue}:last`, JSON.stringify(last));
}

/** Every queue with a recovery, by queue name. */
export async function readStalls(redis: Redis, prefix: string): Promise<QueueStalls[]> {
  const raw = await redis.hgetall(fleetKeys(prefix).watchdog());
  const out: QueueStalls[] = [];
  for (const [field, value] of Object.entries(raw)) {
    const m = /^(.+):recovered$/.exec(field);
    if (!m) continue;
    let last: QueueStalls['last'] = null;
    try {
      const parsed = LastStallSchema.safeParse(JSON.parse(raw[`${m[1]}:last`] ?? 'null'));
      if (parsed.success) last = parsed.data;
    } catch {
      // a damaged record shows the count alone
    }
    out.push({ queue: m[1], recovered: Number(value) || 0, last });
  }
  return out.sort((a, b) => a.queue.localeCompare(b.queue));
}

/** The line `vcfleet status` prints (null when no worker ever stalled). */
export function stallsLine(stalls: readonly QueueStalls[]): string | null {
  if (stalls.length === 0) return null;
  const blocking = (l: NonNullable<QueueStalls['last']>) =>
    l.blocking_status ? `, blocking client ${l.blocking_status}${l.blocking_nodes !== null && l.blocking_nodes !== undefined ? ` with ${l.blocking_nodes} node(s)` : ''}` : '';
  const parts = stalls.map((s) => `${s.queue} ${s.recovered}${s.last ? ` (last at ${s.last.at}, ${s.last.waiting} job(s) waited ${s.last.stalled_s} s${blocking(s.last)})` : ''}`);
  return `queue watchdog: workers that sat idle with jobs waiting, recovered: ${parts.join('; ')}`;
}
