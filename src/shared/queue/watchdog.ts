/**
 * "Jobs waiting, none taken": the check every stage worker runs on its own queue. After a Redis
 * failover (a Cluster promotion, a Sentinel switch) a BullMQ worker can sit idle for good with jobs
 * waiting in its queue: its blocking fetch, or the marker it waits on, was lost with the old primary,
 * and nothing errors. So every few seconds, and at once after each reconnection, the watchdog asks
 * whether the queue has waiting jobs while this worker has a free slot and has taken no job; if that
 * lasts `stallMs`, it logs one line, renews the worker's blocking connection (and wakes its fetch
 * loop), and reports the recovery (Prometheus, and a record in Redis that `vcfleet status` shows).
 * A queue that holds its jobs itself (paused, at its rate limit or its global concurrency) counts as
 * having none ready: the watchdog leaves it alone however long that lasts.
 */
import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { settleWithin } from '../settle-within.ts';

/** How long jobs may wait while a worker with a free slot takes none before it is renewed, in ms. */
export const DEFAULT_STALL_MS = 10_000;
/** How often the queue is asked, in ms. */
export const DEFAULT_CHECK_EVERY_MS = 2_000;
/** At least this long between two recoveries: longer than BullMQ's longest blocking fetch (10 s). */
const RECOVERY_SPACING_MS = 12_000;

export interface QueueWatchdogOptions {
  /** The BullMQ worker watched now (its concurrency, paused state and blocking connection). */
  worker(): Worker;
  /**
   * Put the worker aside for a new one on the same queue, only while it holds no job and once it has
   * handed its locks back; false when it took a job meanwhile (it is not wedged: it stays).
   */
  replace?(): Promise<boolean>;
  /** The queue's name as the log and the metrics say it (`rollout`, `judge`, `results`). */
  queue: string;
  /** Jobs of the queue ready to be taken now (wait + prioritized); rejects while Redis is away. */
  waiting(): Promise<number>;
  /** Jobs this worker holds now. */
  running(): number;
  /** When this worker last took a job (ms since the epoch; 0: never). */
  lastTaken(): number;
  /** Wake the workers blocked on the queue (BullMQ's marker), for a wake-up lost with the old primary. */
  nudge(): Promise<unknown>;
  logger: Logger;
  stallMs?: number;
  checkEveryMs?: number;
  /** Told after each recovery (metrics, the record `vcfleet status` reads); never throws. */
  onRecovered?(info: StallInfo): void;
}

export interface StallInfo {
  queue: string;
  waiting: number;
  /** How long jobs had been waiting while this worker took none, in ms. */
  stalledMs: number;
  /**
   * The worker's blocking client as the recovery found it: its ioredis status (`ready`, `wait`,
   * `disconnecting`, ...) and, on a Cluster, how many nodes it knows (BullMQ #4138: wedged Cluster
   * workers with an empty node list; ioredis 5.11 can leave such a client `disconnecting` for good).
   */
  blocking?: { status: string | null; nodes: number | null; cluster: boolean };
}

/** The BullMQ internals a recovery touches (not in its typings; each one is checked before use). */
interface WorkerInternals {
  backend?: {
    disconnectBlocking?(wait?: boolean): Promise<void>;
    reconnectBlocking?(): Promise<void>;
    blockingConnection?: { _client?: { status?: unknown; isCluster?: unknown; nodes?: () => unknown[] } } | null;
  };
  mainLoopQueue?: { add(p: Promise<unknown>): void } | null;
  limitUntil?: number;
  closing?: unknown;
}

export class QueueWatchdog {
  private timer: NodeJS.Timeout | undefined;
  private checking = false;
  /** Since when jobs have been waiting with a free slot and none taken (0: not now). */
  private waitingSince = 0;
  private stopped = false;
  /** Recoveries since a job was last taken (the first wakes the worker, the next renew its connection). */
  private attempts = 0;
  private lastRecovery = 0;
  /** Recoveries since the worker started. */
  recoveries = 0;

  constructor(private readonly o: QueueWatchdogOptions) {}

  start(): this {
    this.timer = setInterval(() => void this.check(), this.o.checkEveryMs ?? DEFAULT_CHECK_EVERY_MS);
    this.timer.unref();
    return this;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Whether the worker should be taking jobs now: running, not paused, closing or rate-limited, with a free slot. */
  private canTake(): boolean {
    const w = this.o.worker();
    const internals = w as unknown as WorkerInternals;
    if (!w.isRunning() || w.isPaused() || internals.closing) return false;
    if ((internals.limitUntil ?? 0) > Date.now()) return false;
    return this.o.running() < w.concurrency;
  }

  /** One look at the queue; recovers the worker when jobs have waited `stallMs` with none taken. */
  async check(): Promise<void> {
    if (this.stopped || this.checking) return;
    this.checking = true;
    try {
      if (!this.canTake()) return void (this.waitingSince = 0);
      let waiting: number;
      try {
        const asked = this.o.waiting();
        asked.catch(() => undefined);
        if (!(await settleWithin(asked, 3000))) return; // Redis away or slow: the health monitor says so
        waiting = await asked;
      } catch {
        return;
      }
      const now = Date.now();
      if (waiting === 0 || !this.canTake()) return void this.served();
      if (this.waitingSince === 0 || this.o.lastTaken() >= this.waitingSince) return void this.served(now);
      const stalledMs = now - this.waitingSince;
      if (stalledMs < (this.o.stallMs ?? DEFAULT_STALL_MS)) return;
      if (now - this.lastRecovery < Math.max(this.o.stallMs ?? DEFAULT_STALL_MS, RECOVERY_SPACING_MS)) return;
      await this.recover({ queue: this.o.queue, waiting, stalledMs });
    } finally {
      this.checking = false;
    }
  }

  /** The queue is served (or empty) as of `since` (0: nothing waits). */
  private served(since = 0): void {
    this.waitingSince = since;
    this.attempts = 0;
  }

  /**
   * The first time, wake the worker (a wake-up marker lost with the old primary); from the second
   * on (on a Cluster, from the first), start a new worker in its place while it holds no job (its fetch loop awaits a command that
   * will never answer), or else renew its blocking connection (a fetch hanging on a connection the
   * failover took away) and wake it again. Report each recovery.
   */
  private async recover(found: StallInfo): Promise<void> {
    this.recoveries++;
    this.attempts++;
    this.lastRecovery = Date.now();
    const blocking = blockingOf(this.o.worker() as unknown as WorkerInternals);
    const info: StallInfo = { ...found, blocking };
    // In the Cluster failover loop a fresh blocking connection never got an idle worker fetching
    // again, a new worker always did: on a Cluster the first recovery of an idle worker is a new one.
    const replace = (this.attempts > 1 || blocking.cluster) && this.o.replace !== undefined && this.o.running() === 0;
    const renew = this.attempts > 1 && !replace;
    this.o.logger.warn(
      {
        queue: info.queue, waiting: info.waiting, stalled_s: Math.round(info.stalledMs / 1000), running: this.o.running(), concurrency: this.o.worker().concurrency, attempt: this.attempts,
        blocking_status: blocking.status, blocking_nodes: blocking.nodes,
      },
      `jobs waiting, none taken: ${info.waiting} job(s) in the ${info.queue} queue for ${Math.round(info.stalledMs / 1000)} s while this worker had a free slot; ` +
        (replace ? 'starting a new worker in its place' : renew ? 'renewing its connection to Redis' : 'waking it'),
    );
    const internals = this.o.worker() as unknown as WorkerInternals;
    try {
      if (replace && !(await this.o.replace!())) this.o.logger.info({ queue: info.queue }, 'the worker took a job meanwhile: it stays');
      if (renew) {
        // BullMQ reconnects the blocking connection (through any node the client knows) and fetches again.
        await settleWithin(Promise.resolve(internals.backend?.disconnectBlocking?.(false)), 2000);
        await settleWithin(Promise.resolve(internals.backend?.reconnectBlocking?.()), 5000);
        // A fetch loop parked on an empty turn takes its next look now.
        internals.mainLoopQueue?.add(Promise.resolve());
      }
      await settleWithin(this.o.nudge(), 3000);
    } catch (err) {
      this.o.logger.warn({ queue: info.queue, err: errorMessage(err) }, 'could not renew the connection of a stalled worker; trying again at the next check');
    }
    try {
      this.o.onRecovered?.(info);
    } catch {
      // metrics never stop a recovery
    }
  }
}

/** The blocking client's status and, on a Cluster, its known nodes (null where BullMQ's internals do not say). */
function blockingOf(w: WorkerInternals): NonNullable<StallInfo['blocking']> {
  try {
    const client = w.backend?.blockingConnection?._client;
    const cluster = client?.isCluster === true;
    const nodes = cluster && typeof client?.nodes === 'function' ? client.nodes().length : null;
    return { status: typeof client?.status === 'string' ? client.status : null, nodes, cluster };
  } catch {
    return { status: null, nodes: null, cluster: false };
  }
}

/** Wake the workers blocked on a BullMQ queue: the marker a new job adds (a worker that finds no job goes back to waiting). */
export async function nudgeQueue(redis: Redis, prefix: string, bullName: string): Promise<void> {
  await redis.zadd(`${prefix}:${bullName}:marker`, 0, '0');
}

/**
 * KEYS: meta, wait, prioritized, limiter, active. ARGV: the workers' own rate limit (max jobs, 0: none).
 * Returns {ready jobs, why none may be taken now: '' | 'paused' | 'rate_limited' | 'maxed'}.
 */
const READY = `
local meta = redis.call('HMGET', KEYS[1], 'paused', 'concurrency', 'max')
local ready = redis.call('LLEN', KEYS[2]) + redis.call('ZCARD', KEYS[3])
if meta[1] then return {ready, 'paused'} end
local max = tonumber(meta[3] or ARGV[1]) or 0
if max > 0 and (tonumber(redis.call('GET', KEYS[4]) or 0) or 0) >= max and redis.call('PTTL', KEYS[4]) > 0 then return {ready, 'rate_limited'} end
local concurrency = tonumber(meta[2] or 0) or 0
if concurrency > 0 and redis.call('LLEN', KEYS[5]) >= concurrency then return {ready, 'maxed'} end
return {ready, ''}
`;

/** Why a queue's waiting jobs may not be taken now, whatever its workers do. */
export type QueueHeld = 'paused' | 'rate_limited' | 'maxed';

/**
 * Jobs of a BullMQ queue ready to be taken now: its wait list and its prioritized set, none while the
 * queue itself holds them (paused from `vcfleet run` or Bull Board, at its rate limit, at its global
 * concurrency): a worker that takes none of those is not stalled. `limiterMax`: the workers' own limit.
 */
export async function queueReadiness(redis: Redis, prefix: string, bullName: string, limiterMax = 0): Promise<{ ready: number; held: QueueHeld | null }> {
  const k = (s: string) => `${prefix}:${bullName}:${s}`;
  const [ready, held] = (await redis.eval(READY, 5, k('meta'), k('wait'), k('prioritized'), k('limiter'), k('active'), String(limiterMax))) as [number, string];
  return { ready, held: held === '' ? null : (held as QueueHeld) };
}

/** Jobs of a BullMQ queue ready to be taken now (0 while the queue holds them: queueReadiness). */
export async function readyJobs(redis: Redis, prefix: string, bullName: string, limiterMax = 0): Promise<number> {
  const { ready, held } = await queueReadiness(redis, prefix, bullName, limiterMax);
  return held ? 0 : ready;
}
