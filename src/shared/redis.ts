/**
 * Redis connections. Workers wait out outages (`maxRetriesPerRequest: null`); producers and CLIs
 * fail fast. Whoever creates a connection closes it.
 */
import net from 'node:net';
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from './logger.ts';
import { InfraError } from './errors.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export type { Redis };

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

export type ConnectionRole = 'worker' | 'client';

/** A new connection; `worker` connections retry forever, `client` ones fail fast. */
export function createRedis(url: string, role: ConnectionRole, extra: RedisOptions = {}): Redis {
  // disconnect() ends the socket and waits up to disconnectTimeout for its 'close'; a socket that
  // already failed never closes again, so with ioredis's 2 s default every process that gave up on an
  // unreachable Redis lingered 2 s before it exited (benchmark 9).
  const common: RedisOptions = { lazyConnect: false, connectionName: `vcfleet-${role}`, disconnectTimeout: 200, ...extra };
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

/**
 * Wait for the first answer to PING, at most `timeoutMs`, then fail with one line that names the URL
 * (password masked), the last error Redis or the network gave, and what to do about it. A worker
 * connection queues commands while it reconnects for ever, so the wait is bounded here, not by it.
 */
export async function waitForRedis(redis: Redis, url: string, timeoutMs = 15_000): Promise<void> {
  let lastError = 'no answer';
  // "Connection is closed" only says that a connection gave up; the error before it says why.
  const note = (message: string) => void (/Connection is closed/i.test(message) && lastError !== 'no answer' ? undefined : (lastError = message));
  const onError = (err: Error) => note(err.message);
  redis.on('error', onError);
  const deadline = Date.now() + timeoutMs;
  let asked = false;
  try {
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new InfraError(unreachableMessage(url, lastError, timeoutMs));
      const ping = redis.ping();
      ping.catch(() => undefined); // answered after the wait gave up, or rejected on disconnect
      try {
        const answered = await Promise.race([ping.then(() => true), sleep(Math.min(left, 1000), false)]);
        if (answered) return;
      } catch (err) {
        note((err as Error).message);
        await sleep(Math.min(250, Math.max(0, deadline - Date.now())));
      }
      // A server that closes every connection at once may have said why before any command (a
      // protected-mode DENIED), which the client never reads: ask it once on a plain socket.
      if (!asked && BROKEN.test(lastError)) {
        asked = true;
        lastError = (await serverGreeting(url)) ?? lastError;
      }
      // Refused credentials do not fix themselves, and a client connection that gave up stays closed.
      if (DEFINITE.test(lastError) || redis.status === 'end') throw new InfraError(unreachableMessage(url, lastError));
    }
  } finally {
    redis.off('error', onError);
  }
}

/** Errors of a connection the server broke off at once. */
const BROKEN = /EPIPE|ECONNRESET|Connection is closed|max retries per request/i;

/**
 * What a Redis server says to a new client before any command (`-DENIED …` in protected mode), read
 * on a plain socket (not for `rediss://`); null when it says nothing within `ms`.
 */
async function serverGreeting(url: string, ms = 1000): Promise<string | null> {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return null;
  }
  if (target.protocol !== 'redis:') return null;
  return new Promise((resolve) => {
    let said = '';
    const socket = net.connect(Number(target.port || 6379), target.hostname.replace(/^\[|\]$/g, ''));
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(said.startsWith('-') ? said.slice(1).split('\r\n')[0] : null);
    };
    const timer = setTimeout(done, ms);
    socket.on('data', (d) => {
      said += d.toString('utf8');
      if (said.includes('\r\n')) done();
    });
    socket.on('error', done);
    socket.on('close', done);
  });
}

/** Answers of a Redis that is up but will not serve this client as configured. */
const DEFINITE = /DENIED|NOAUTH|WRONGPASS|invalid password|invalid username/;

/** What an unreachable Redis says, and what the user can do about it. */
export function unreachableMessage(url: string, error: string, waitedMs?: number): string {
  const hint = /DENIED|protected mode/i.test(error)
    ? 'Redis is in protected mode and refuses other hosts: give it a password (requirepass, or an ACL user) and put it in REDIS_URL as redis://:PASSWORD@host:6379'
    : /NOAUTH|WRONGPASS|AUTH|invalid password|invalid username/i.test(error)
      ? 'Redis wants a password: set it in REDIS_URL (redis://:PASSWORD@host:6379, or redis://USER:PASSWORD@host:6379 for an ACL user)'
      : /ECONNREFUSED/.test(error)
        ? 'nothing listens there: start redis-server on that host (bound to an address this host can reach) or fix REDIS_URL'
        : 'check the address, the port and the firewall between this host and Redis, or fix REDIS_URL';
  const waited = waitedMs === undefined ? '' : ` (no answer within ${Math.round(waitedMs / 1000)} s, redis.connect_timeout_s)`;
  return `cannot reach Redis at ${redactUrl(url)}${waited}: ${error.replace(/\.$/, '')}; ${hint}`;
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
 * Whether the server keeps what it holds across a restart (an append-only file or save points);
 * null when it does not say (CONFIG is disabled, as on some managed Redis).
 */
export async function redisPersists(redis: Redis): Promise<boolean | null> {
  try {
    const aof = ((await redis.config('GET', 'appendonly')) as string[])[1];
    const save = ((await redis.config('GET', 'save')) as string[])[1];
    return aof === 'yes' || (save ?? '') !== '';
  } catch {
    return null;
  }
}

/**
 * Check the server suits a job queue: `maxmemory-policy` must be `noeviction` (an evicted job is a
 * lost rollout); warn when nothing is persisted (a restart loses the run).
 */
export async function checkRedisServer(redis: Redis, logger: Logger, warnPersistence = true): Promise<void> {
  let policy: string | undefined;
  try {
    policy = ((await redis.config('GET', 'maxmemory-policy')) as string[])[1];
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
  if (warnPersistence && (await redisPersists(redis)) === false) {
    logger.warn('Redis persists nothing (appendonly no, no save points): a Redis restart loses the run in flight');
  }
}
