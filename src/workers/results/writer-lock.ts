/**
 * One results consumer writes at a time: a Redis lock with a token, renewed while held. A second
 * consumer waits for it; a consumer that loses it (Redis gone past the lease) stops writing.
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from '../../shared/logger.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { settleWithin } from '../../shared/settle-within.ts';

const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

export interface WriterLockOptions {
  /** Lease in milliseconds; renewed every third of it. Default 15000. */
  leaseMs?: number;
  /** How often a waiting consumer tries again, in milliseconds. Default 1000. */
  pollMs?: number;
}

export class WriterLock {
  private readonly token = `${hostname()}:${process.pid}:${randomUUID()}`;
  private timer: NodeJS.Timeout | undefined;
  private readonly leaseMs: number;
  private readonly pollMs: number;

  constructor(private readonly redis: Redis, private readonly key: string, private readonly logger: Logger, options: WriterLockOptions = {}) {
    this.leaseMs = options.leaseMs ?? 15_000;
    this.pollMs = options.pollMs ?? 1000;
  }

  /** Wait until the lock is ours (or `signal` aborts: returns false). `onLost` fires if it is lost later. */
  async acquire(signal: AbortSignal, onLost: () => void): Promise<boolean> {
    let warned = false;
    while (!signal.aborted) {
      const ok = await this.redis.set(this.key, this.token, 'PX', this.leaseMs, 'NX');
      if (ok === 'OK') {
        this.timer = setInterval(() => void this.renew(onLost), Math.floor(this.leaseMs / 3));
        return true;
      }
      if (!warned) {
        const holder = await this.redis.get(this.key);
        this.logger.warn({ holder }, 'another results consumer is writing; waiting for it to stop (one writer at a time)');
        warned = true;
      }
      await sleep(this.pollMs);
    }
    return false;
  }

  private async renew(onLost: () => void): Promise<void> {
    try {
      const ok = await this.redis.eval(RENEW, 1, this.key, this.token, String(this.leaseMs));
      if (ok === 1) return;
      // The lease ran out (e.g. Redis was away longer than it): take it back if nobody else has.
      if ((await this.redis.set(this.key, this.token, 'PX', this.leaseMs, 'NX')) === 'OK') return;
      this.logger.error('the results writer lock was lost; stopping this consumer');
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'cannot renew the writer lock (Redis unreachable?)');
      return;
    }
    clearInterval(this.timer);
    onLost();
  }

  async release(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    // With Redis away the command would wait for it for ever: the lease ends the lock anyway.
    const released = this.redis.eval(RELEASE, 1, this.key, this.token).catch(() => {});
    await settleWithin(released, 1000);
  }
}
