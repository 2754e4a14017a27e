/**
 * Redis connections. Workers wait out outages (`maxRetriesPerRequest: null`); producers and CLIs
 * fail fast. Whoever creates a connection closes it.
 */
import net from 'node:net';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { redactUrl, resolveRedisEndpoint, type RedisEndpoint } from './endpoint.ts';
import type { Logger } from '../logger.ts';
import { ConfigError, InfraError } from '../errors.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { followSwitches } from './sentinel-switch.ts';
import { learnClusterNodes } from './cluster-seeds.ts';
import { probeRedis } from './probe.ts';

export type { Redis };
export { DEFAULT_REDIS_URL, redactUrl, resolveRedisEndpoint, type RedisEndpoint } from './endpoint.ts';

export type ConnectionRole = 'worker' | 'client';

/**
 * A new connection to `target` (a URL, or the endpoint of the config: one server, a Sentinel-watched
 * primary, a Cluster); `worker` connections retry forever, `client` ones fail fast. A Cluster client is
 * typed as a `Redis`: it takes the same commands (BullMQ accepts either), and keys of one hash tag go
 * to one node.
 */
export function createRedis(target: string | RedisEndpoint, role: ConnectionRole, extra: RedisOptions = {}): Redis {
  const endpoint = typeof target === 'string' ? resolveRedisEndpoint({ redis_url: target, redis: NO_HA }) : target;
  // disconnect() ends the socket and waits up to disconnectTimeout for its 'close'; a socket that
  // already failed never closes again, so with ioredis's 2 s default every process that gave up on an
  // unreachable Redis lingered 2 s before it exited (benchmark 9).
  const common: RedisOptions = { lazyConnect: false, connectionName: `vcfleet-${role}`, disconnectTimeout: 200, ...extra };
  const options = { ...common, ...(role === 'worker' ? WORKER_OPTIONS : CLIENT_OPTIONS) };
  const redis = connectTo(endpoint, options, role);
  // Errors surface through commands, waitForRedis and the connection-state log; without a listener ioredis prints each one.
  redis.on('error', () => {});
  return redis;
}

const NO_HA = { sentinels: [], sentinel_name: null, sentinel_password: null, cluster: false, cluster_nodes: [] };

const WORKER_OPTIONS: RedisOptions = { maxRetriesPerRequest: null, enableOfflineQueue: true, retryStrategy: (times) => Math.min(200 * times, 2000) };
const CLIENT_OPTIONS: RedisOptions = { maxRetriesPerRequest: 2, connectTimeout: 5000, retryStrategy: (times) => (times > 3 ? null : 200 * times) };

/** How often a worker's Cluster client refreshes its slots (and so the nodes it knows), in ms. */
const CLUSTER_REFRESH_MS = 5000;

/** A primary demoted by a failover answers writes with READONLY: reconnect (Sentinel names the new one) and resend. */
const reconnectOnReadonly = (err: Error) => (/^READONLY/.test(err.message) ? 2 : false);

function connectTo(endpoint: RedisEndpoint, options: RedisOptions, role: ConnectionRole): Redis {
  const auth = { ...(endpoint.username ? { username: endpoint.username } : {}), ...(endpoint.password ? { password: endpoint.password } : {}) };
  if (endpoint.kind === 'single') return new Redis(endpoint.url, { ...options, reconnectOnError: reconnectOnReadonly });
  if (endpoint.kind === 'sentinel') {
    const redis = new Redis({
      ...options, ...auth,
      sentinels: endpoint.sentinels,
      name: endpoint.name,
      db: endpoint.db,
      ...(endpoint.sentinelPassword ? { sentinelPassword: endpoint.sentinelPassword } : {}),
      ...(endpoint.tls ? { tls: {}, enableTLSForSentinelMode: true } : {}),
      // Not ioredis's own +switch-master detector: it can end a reconnecting connection for good (sentinel-switch.ts).
      failoverDetector: false,
      // The sentinels are asked again on each reconnect; a sentinel that is down is skipped.
      sentinelRetryStrategy: (times) => (role === 'client' && times > 3 ? null : Math.min(200 * times, 2000)),
      reconnectOnError: reconnectOnReadonly,
    });
    // A failover moves the connection at once, not at the next error (a frozen primary gives none).
    followSwitches(redis, endpoint);
    return redis;
  }
  const { retryStrategy, maxRetriesPerRequest, enableOfflineQueue, ...nodeOptions } = options;
  const cluster = new Cluster(endpoint.nodes, {
    redisOptions: { ...nodeOptions, ...auth, maxRetriesPerRequest, ...(endpoint.tls ? { tls: {} } : {}) },
    clusterRetryStrategy: retryStrategy,
    enableOfflineQueue: enableOfflineQueue ?? true,
    // A failover moves slots: wait for the cluster to settle and follow MOVED/ASK that far.
    retryDelayOnFailover: 500,
    retryDelayOnClusterDown: 500,
    retryDelayOnTryAgain: 500,
    maxRedirections: 32,
    slotsRefreshTimeout: 2000,
    // Ask the Cluster for its layout now and then, not only after a MOVED: the nodes it names are the
    // ones a reconnect can go through (cluster-seeds.ts), and replicas appear there only once synced.
    slotsRefreshInterval: role === 'worker' ? CLUSTER_REFRESH_MS : 0,
    scaleReads: 'master',
  });
  // Reconnect through any node the Cluster reported, not only the seeds (a dead seed is a dead end).
  return learnClusterNodes(cluster) as unknown as Redis;
}

/**
 * Wait for the first answer to PING, at most `timeoutMs`, then fail with one line that names the URL
 * (password masked), the last error Redis or the network gave, and what to do about it: a
 * ConfigError, as every caller waits at its start (exit 2). A worker connection queues commands while
 * it reconnects for ever, so the wait is bounded here, not by it.
 */
export async function waitForRedis(redis: Redis, target: string | RedisEndpoint, timeoutMs = 15_000): Promise<void> {
  const url = typeof target === 'string' ? target : target.display;
  const plainUrl = typeof target === 'string' ? target : target.kind === 'single' ? target.url : null;
  let lastError = 'no answer';
  // "Connection is closed" only says that a connection gave up; the error before it says why.
  const note = (message: string) => void (/Connection is closed/i.test(message) && lastError !== 'no answer' ? undefined : (lastError = message));
  const onError = (err: Error) => note(err.message);
  redis.on('error', onError);
  const deadline = Date.now() + timeoutMs;
  let asked = false;
  try {
    if (plainUrl) await refuseNonRedis(plainUrl, url, timeoutMs);
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new ConfigError(unreachableMessage(url, lastError, timeoutMs));
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
      if (!asked && plainUrl && BROKEN.test(lastError)) {
        asked = true;
        lastError = (await serverGreeting(plainUrl)) ?? lastError;
      }
      // Refused credentials do not fix themselves, and a client connection that gave up stays closed.
      if (DEFINITE.test(lastError) || redis.status === 'end') throw new ConfigError(unreachableMessage(url, lastError));
    }
  } finally {
    redis.off('error', onError);
  }
}

/** How long a server that accepted the connection may keep quiet before it is not taken for a Redis. */
const PROBE_MS = 5000;

/** At start, a port where something else listens, or something that never answers, is named at once (probe.ts). */
async function refuseNonRedis(plainUrl: string, url: string, timeoutMs: number): Promise<void> {
  const probe = await probeRedis(plainUrl, Math.min(PROBE_MS, timeoutMs));
  const at = `cannot reach Redis at ${redactUrl(url)}`;
  const fix = 'check the port (Redis listens on 6379) or fix REDIS_URL';
  if (probe.kind === 'not_redis') throw new ConfigError(`${at}: something else listens there (it answered PING with "${probe.said}", not as Redis does); ${fix}`);
  if (probe.kind === 'closed') throw new ConfigError(`${at}: it closed the connection without answering PING (not a Redis server, or one that wants TLS: rediss://); ${fix}`);
  if (probe.kind === 'silent' && probe.waitedMs >= timeoutMs) throw new ConfigError(unreachableMessage(url, 'it accepts connections but never answers PING', timeoutMs));
  if (probe.kind === 'silent') throw new ConfigError(`${at}: it accepts connections but did not answer PING within ${probe.waitedMs / 1000} s (a firewall that swallows, another service); ${fix}`);
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

/** What the user can do about what an unreachable Redis said, first match wins. */
const HINTS: ReadonlyArray<[RegExp, string]> = [
  [/DENIED|protected mode/i, 'Redis is in protected mode and refuses other hosts: give it a password (requirepass, or an ACL user) and put it in REDIS_URL as redis://:PASSWORD@host:6379'],
  [/NOAUTH|WRONGPASS|AUTH|invalid password|invalid username/i, 'Redis wants a password: set it in REDIS_URL (redis://:PASSWORD@host:6379, or redis://USER:PASSWORD@host:6379 for an ACL user)'],
  [/None of startup nodes|Failed to refresh slots/i, 'no listed node answers as a Redis Cluster node: check redis.cluster_nodes (or the hosts of redis+cluster://), and that the nodes run with cluster-enabled yes; for a single server or a Sentinel set, unset redis.cluster'],
  [/sentinels are unreachable/i, 'no sentinel answers: check redis.sentinels (or the hosts of redis+sentinel://; sentinels usually listen on 26379), redis.sentinel_name and redis.sentinel_password'],
  [/ECONNREFUSED/, 'nothing listens there: start redis-server on that host (bound to an address this host can reach) or fix REDIS_URL'],
];

/** What an unreachable Redis says, and what the user can do about it. */
export function unreachableMessage(url: string, error: string, waitedMs?: number): string {
  const hint = HINTS.find(([pattern]) => pattern.test(error))?.[1] ?? 'check the address, the port and the firewall between this host and Redis, or fix REDIS_URL';
  const waited = waitedMs === undefined ? '' : ` (no answer within ${Math.round(waitedMs / 1000)} s, redis.connect_timeout_s)`;
  return `cannot reach Redis at ${redactUrl(url)}${waited}: ${error.replace(/\.$/, '')}; ${hint}`;
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

/** `{tag}` at the start of a key prefix: Redis Cluster puts every key that carries it in one slot. */
export function hashTagOf(prefix: string): string | null {
  return /^\{([^}]+)\}/.exec(prefix)?.[1] ?? null;
}

/**
 * What kind of Redis answers, checked against how the config connects to it (INFO): a Cluster node
 * needs `redis.cluster` and a hash-tagged prefix; a replica takes no writes. Throws naming the fix.
 */
export async function checkRedisDeployment(redis: Redis, endpoint: RedisEndpoint, prefix: string): Promise<'single' | 'sentinel' | 'cluster'> {
  if (endpoint.kind === 'cluster' && !hashTagOf(prefix)) {
    throw new ConfigError(
      `queues.prefix "${prefix}" has no hash tag: on a Redis Cluster BullMQ's scripts and the fleet's own multi-key commands need every key in one slot; ` +
        `set queues.prefix to {${prefix}} (VCFLEET_PREFIX={${prefix}} or ++queues.prefix={${prefix}})`,
    );
  }
  let fields: Record<string, string>;
  try {
    fields = infoFields(`${await redis.info('cluster')}\r\n${await redis.info('replication')}`);
  } catch {
    return endpoint.kind; // INFO disabled (some managed services): nothing to check against
  }
  if (endpoint.kind !== 'cluster' && fields.cluster_enabled === '1') {
    throw new InfraError(
      `Redis at ${endpoint.display} is a Redis Cluster node: set redis.cluster=true (or REDIS_URL=redis+cluster://host:port,…) ` +
        `and give queues.prefix a hash tag, e.g. VCFLEET_PREFIX={${prefix.replace(/^\{[^}]*\}/, '')}}`,
    );
  }
  if (endpoint.kind === 'single' && fields.role === 'slave') {
    throw new InfraError(
      `Redis at ${endpoint.display} is a read-only replica of ${fields.master_host}:${fields.master_port}: point REDIS_URL at the primary, ` +
        'or let Sentinel find it (redis.sentinels and redis.sentinel_name, or REDIS_URL=redis+sentinel://h1:26379,h2:26379/<name>)',
    );
  }
  return endpoint.kind;
}

function infoFields(info: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of info.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1).trim();
  }
  return out;
}

/**
 * After writes that must survive a failover (a run produced): wait until a replica has them (`WAIT 1`),
 * at most `timeoutMs`. Replication is asynchronous, so a primary that dies just after acknowledging may
 * take its last writes with it; this narrows that window. Returns the replicas that acknowledged, or
 * null when there is no replica to wait for (or a Cluster client, whose WAIT would reach a random node).
 */
export async function waitForReplicas(redis: Redis, timeoutMs = 2000): Promise<number | null> {
  if ((redis as unknown as { isCluster?: boolean }).isCluster) return null;
  try {
    const replicas = Number(infoFields(await redis.info('replication')).connected_slaves ?? 0);
    if (replicas === 0) return null;
    return (await redis.call('WAIT', 1, timeoutMs)) as number;
  } catch {
    return null;
  }
}
