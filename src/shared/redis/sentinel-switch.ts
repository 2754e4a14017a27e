/**
 * Following a Sentinel failover at once: one subscription per process and master group to the
 * sentinels' `+switch-master`, which moves every registered connection that is up to the new
 * primary (a connection to a frozen or cut-off primary would otherwise wait on it for ever).
 *
 * ioredis has this built in (`failoverDetector`), but its detector outlives the connection it was
 * made for: when `+switch-master` arrives while that connection is already reconnecting (the primary
 * died, the client is asking the sentinels), it aborts the reconnect, and the connection ends for
 * good ("Connection is closed.", status `end`) — every worker of a process stalled after a failover
 * about one time in three. Here only a connection that is `ready` is moved; one that is reconnecting
 * asks the sentinels anyway.
 */
import { Redis } from 'ioredis';
import type { HostPort } from './endpoint.ts';

const CHANNEL = '+switch-master';

export interface SentinelWatchTarget {
  sentinels: HostPort[];
  name: string;
  sentinelPassword?: string;
  tls: boolean;
}

interface Watch {
  subscribers: Redis[];
  members: Set<Redis>;
  /** Times a switch moved connections (for tests and logs). */
  switches: number;
}

const watches = new Map<string, Watch>();

function keyOf(t: SentinelWatchTarget): string {
  return `${t.name}@${t.sentinels.map((s) => `${s.host}:${s.port}`).sort().join(',')}`;
}

function open(t: SentinelWatchTarget, watch: Watch): Redis[] {
  return t.sentinels.map((s) => {
    const sub = new Redis({
      host: s.host, port: s.port,
      ...(t.sentinelPassword ? { password: t.sentinelPassword } : {}),
      ...(t.tls ? { tls: {} } : {}),
      connectionName: 'vcfleet-sentinel-watch',
      // A sentinel that is down is asked again, quietly; the others still report the switch.
      retryStrategy: (times) => Math.min(500 * times, 5000),
      maxRetriesPerRequest: null,
      disconnectTimeout: 200,
    });
    sub.on('error', () => {});
    sub.subscribe(CHANNEL).catch(() => {}); // resubscribed by ioredis after each reconnect
    sub.on('message', (channel: string, message: string) => {
      // `<master-name> <old-ip> <old-port> <new-ip> <new-port>`
      if (channel !== CHANNEL || message.split(' ')[0] !== t.name) return;
      let moved = 0;
      for (const member of watch.members) {
        if (member.status !== 'ready') continue;
        member.disconnect(true);
        moved++;
      }
      if (moved > 0) watch.switches++;
    });
    return sub;
  });
}

/**
 * Move `redis` (a Sentinel-mode connection of `target`) to the new primary whenever the sentinels
 * announce one, and its duplicates too (BullMQ duplicates a connection for its blocking commands);
 * a connection leaves the watch when it ends, and the last one to leave closes the subscriptions.
 */
export function followSwitches(redis: Redis, target: SentinelWatchTarget): void {
  join(redis, target);
  const duplicate = redis.duplicate.bind(redis);
  redis.duplicate = (override) => {
    const copy = duplicate(override);
    followSwitches(copy, target);
    return copy;
  };
}

function join(redis: Redis, target: SentinelWatchTarget): void {
  const key = keyOf(target);
  let watch = watches.get(key);
  if (!watch) {
    watch = { subscribers: [], members: new Set(), switches: 0 };
    watch.subscribers = open(target, watch);
    watches.set(key, watch);
  }
  const w = watch;
  w.members.add(redis);
  redis.once('end', () => {
    w.members.delete(redis);
    if (w.members.size > 0 || watches.get(key) !== w) return;
    watches.delete(key);
    for (const sub of w.subscribers) sub.disconnect();
  });
}

/** How many switches the watch of `target` acted on (0 when there is none). */
export function switchesSeen(target: SentinelWatchTarget): number {
  return watches.get(keyOf(target))?.switches ?? 0;
}
