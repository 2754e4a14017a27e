/**
 * Redis connections. Workers wait out outages (`maxRetriesPerRequest: null`); producers and CLIs
 * fail fast. Whoever creates a connection closes it.
 */
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from './logger.ts';
import { InfraError } from './errors.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export type { Redis };

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

export type ConnectionRole = 'worker' | 'client';

/** A new connection; `worker` connections retry forever, `client` ones fail fast. */
export function createRedis(url: string, role: ConnectionRole, extra: RedisOptions = {}): Redis {
  const common: RedisOptions = { lazyConnect: false, connectionName: `vcfleet-${role}`, ...extra };
  const redis = role === 'worker' ? workerConnection(url, common) : clientConnection(url, common);
  // Errors surface through commands and waitForRedis; without a listener ioredis prints each one.
  redis.on('error', () => {});
  return redis;
}

function workerConnection(url: string, common: RedisOptions): Redis {
  return new Redis(url, {
    ...common,
    maxRetriesPerRequest: null,
    enableOfflineQueue: true,
    retryStrategy: (times) => Math.min(200 * times, 2000),
  });
}

function clientConnection(url: string, common: RedisOptions): Redis {
  return new Redis(url, {
    ...common,
    maxRetriesPerRequest: 2,
    connectTimeout: 5000,
    retryStrategy: (times) => (times > 3 ? null : 200 * times),
  });
}

/** Wait for the first connection, failing with a message that says what to do. */
export async function waitForRedis(redis: Redis, url: string, timeoutMs = 10_000): Promise<void> {
  const started = Date.now();
  for (;;) {
    try {
      await redis.ping();
      return;
    } catch (err) {
      if (Date.now() - started > timeoutMs) {
        throw new InfraError(
          `cannot reach Redis at ${redactUrl(url)} (${(err as Error).message}); start redis-server or set REDIS_URL`,
        );
      }
      await sleep(250);
    }
  }
}

/** The URL without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

/**
 * Check the server suits a job queue: `maxmemory-policy` must be `noeviction` (an evicted job is a
 * lost rollout); warn when nothing is persisted (a restart loses the run).
 */
export async function checkRedisServer(redis: Redis, logger: Logger, warnPersistence = true): Promise<void> {
  let policy: string | undefined;
  let aof: string | undefined;
  let save: string | undefined;
  try {
    policy = ((await redis.config('GET', 'maxmemory-policy')) as string[])[1];
    aof = ((await redis.config('GET', 'appendonly')) as string[])[1];
    save = ((await redis.config('GET', 'save')) as string[])[1];
  } catch {
    logger.warn('cannot read the Redis configuration (CONFIG is disabled); make sure maxmemory-policy is noeviction');
    return;
  }
  if (policy && policy !== 'noeviction') {
    throw new InfraError(
      `Redis maxmemory-policy is "${policy}": evicted keys would lose jobs. ` +
        'Set it with `redis-cli CONFIG SET maxmemory-policy noeviction` (and in redis.conf).',
    );
  }
  if (warnPersistence && aof !== 'yes' && !save) {
    logger.warn('Redis persists nothing (appendonly no, no save points): a Redis restart loses the run in flight');
  }
}
