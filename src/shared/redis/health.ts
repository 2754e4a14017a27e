/**
 * What a role says about its Redis connection: one line when it is lost and one when it is back (not
 * one per retry), and, for an answer Redis will give again however often it is asked (`MOVED`,
 * `CROSSSLOT`, `NOAUTH`, `WRONGPASS`), one error line naming the fix and a stop of the role at once.
 * One monitor per connection; the BullMQ workers on it report their own connections' errors here too.
 */
import type { Redis } from 'ioredis';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { settleWithin } from '../settle-within.ts';

/** The fix for an error Redis will repeat, or null when retrying may help. */
export function fatalRedisFix(message: string): string | null {
  if (/^(MOVED|ASK) \d+ /.test(message)) {
    return 'this is a Redis Cluster node: set redis.cluster=true (or REDIS_URL=redis+cluster://host:port,…) and give queues.prefix a hash tag, e.g. VCFLEET_PREFIX={vcfleet}';
  }
  if (/^CROSSSLOT/.test(message)) {
    return 'keys of one command fall in different Redis Cluster slots: give queues.prefix a hash tag, e.g. VCFLEET_PREFIX={vcfleet}, so every key of the fleet shares one slot';
  }
  if (/^(NOAUTH|WRONGPASS)|invalid username-password/i.test(message)) {
    return 'Redis wants a password: set it in REDIS_URL (redis://:PASSWORD@host:6379, or redis+sentinel://:PASSWORD@h1:26379,…/name); the sentinels\' own in redis.sentinel_password (REDIS_SENTINEL_PASSWORD)';
  }
  return null;
}

/** Errors of a connection that is down, moving or not yet serving (as opposed to a command's own failure). */
const CONNECTION_ERROR = /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE|Connection is closed|connect(ion)? (closed|timeout)|reconnecting|cluster node is gone|sentinels are unreachable|Failed to refresh slots|None of startup nodes|CLUSTERDOWN|TRYAGAIN|READONLY|LOADING|MASTERDOWN|max retries per request|Stream isn't writeable/i;

export interface RedisHealthOptions {
  logger: Logger;
  /** The address for messages (passwords masked). */
  display: string;
  /** Called once with the message (error and fix) when Redis gives an answer retrying cannot change. */
  onFatal?(message: string): void;
  /** Resolves when Redis answers (a PING); asked every second while the connection is lost. */
  probe?(): Promise<unknown>;
  /**
   * How long Redis must stay back before the `onBack` listeners run, in ms (default 0: at once). A
   * failover comes back connection by connection, and a Cluster client may lose a node more than once
   * while it settles: one reconnection, one reconcile, not one per connection that comes back.
   */
  settleMs?: number;
}

export class RedisHealth {
  private up = true;
  private downSince = 0;
  private fatal = false;
  private lastError = '';
  private probing: NodeJS.Timeout | undefined;
  private asking = false;
  private closed = false;
  /** Times the connection came back after being lost (a failover, a restart). */
  recoveries = 0;
  private readonly backListeners = new Set<() => void>();
  private settling: NodeJS.Timeout | undefined;
  /** Lost again while settling: the next `ready()` ends the same loss. */
  private relapsed = false;

  constructor(private readonly opts: RedisHealthOptions) {}

  /** A connection of this role saw `err`: log the loss once, stop the role on an error that repeats. */
  failed(err: unknown): void {
    if (this.closed) return;
    const message = errorMessage(err);
    const fix = fatalRedisFix(message);
    if (fix) {
      if (this.fatal) return;
      this.fatal = true;
      const line = `Redis at ${this.opts.display} answered "${message.split('\n')[0].slice(0, 200)}": ${fix}`;
      this.opts.logger.error({ err: message.slice(0, 200) }, line);
      this.opts.onFatal?.(line);
      return;
    }
    if (!CONNECTION_ERROR.test(message)) {
      // Not the connection (a lock lost meanwhile, a script's own error): worth its own line.
      this.opts.logger.warn({ err: message.split('\n')[0].slice(0, 200) }, 'Redis command failed');
      return;
    }
    this.lastError = message.split('\n')[0].slice(0, 200);
    if (!this.up) return;
    this.up = false;
    // Lost again before it settled: the listeners run once, when this loss is over too.
    const settling = this.settling !== undefined;
    this.cancelSettling();
    if (settling) {
      // Still the same loss for the log: no second "lost" line, no second "is back".
      this.relapsed = true;
      this.startProbing();
      return;
    }
    this.downSince = Date.now();
    this.opts.logger.warn({ err: this.lastError }, `lost the connection to Redis at ${this.opts.display}; retrying (one line when it is back)`);
    this.startProbing();
  }

  /** A Cluster client stays "ready" while a node fails over: ask until Redis answers again. */
  private startProbing(): void {
    const probe = this.opts.probe;
    if (!probe || this.probing) return;
    this.probing = setInterval(() => {
      if (this.asking) return;
      this.asking = true;
      let answered = false;
      const answer = probe().then(() => (answered = true), () => undefined);
      void settleWithin(answer, 1500).then(() => {
        this.asking = false;
        if (answered) this.ready();
      });
    }, 1000);
    this.probing.unref();
  }

  /** The connection was closed on purpose: nothing more to report. */
  close(): void {
    this.closed = true;
    this.cancelSettling();
    this.stop();
  }

  private cancelSettling(): void {
    if (this.settling) clearTimeout(this.settling);
    this.settling = undefined;
  }

  /** Stop asking. */
  stop(): void {
    if (this.probing) clearInterval(this.probing);
    this.probing = undefined;
  }

  /** A connection of this role is ready again. */
  ready(): void {
    if (this.up) return;
    this.up = true;
    this.stop();
    if (!this.relapsed) {
      this.recoveries++;
      this.opts.logger.info({ down_s: Math.round((Date.now() - this.downSince) / 100) / 10, last_err: this.lastError }, `Redis at ${this.opts.display} is back`);
    }
    this.relapsed = false;
    const settleMs = this.opts.settleMs ?? 0;
    if (settleMs <= 0) return this.backAgain();
    this.settling = setTimeout(() => {
      this.settling = undefined;
      if (this.up && !this.closed) this.backAgain();
    }, settleMs);
    this.settling.unref();
  }

  private backAgain(): void {
    for (const fn of this.backListeners) fn();
  }

  get isUp(): boolean {
    return this.up;
  }

  /** Called each time the connection comes back after a loss (to reconcile after a failover). */
  onBack(fn: () => void): () => void {
    this.backListeners.add(fn);
    return () => this.backListeners.delete(fn);
  }
}

const monitors = new WeakMap<object, RedisHealth>();

/** A role's connection must stay back this long before it reconciles (a failover flaps for a few seconds). */
const BACK_SETTLE_MS = 5000;

/** Watch `redis` (once; later calls return the same monitor). */
export function watchRedisHealth(redis: Redis, opts: RedisHealthOptions): RedisHealth {
  const known = monitors.get(redis);
  if (known) return known;
  const health = new RedisHealth({ probe: () => redis.ping(), settleMs: BACK_SETTLE_MS, ...opts });
  monitors.set(redis, health);
  redis.on('error', (err: Error) => health.failed(err));
  redis.on('reconnecting', () => health.failed(new Error('connection closed; reconnecting')));
  // A Cluster client follows a failover by itself (MOVED, a slots refresh) and may never report an error:
  // a node leaving its pool is the sign, and the next answer ends the loss (so runs are reconciled).
  redis.on('-node', () => health.failed(new Error('a cluster node is gone; following the cluster')));
  redis.on('end', () => health.close());
  // A Cluster client reports its nodes' errors as 'node error'.
  redis.on('node error', (err: Error) => health.failed(err));
  redis.on('ready', () => health.ready());
  return health;
}

/** The monitor of a connection, when one watches it. */
export function redisHealthOf(redis: Redis): RedisHealth | undefined {
  return monitors.get(redis);
}
