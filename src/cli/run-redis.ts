/**
 * Where the commands that read runs find them, one rule for all (`runs`, `status`, `dashboard`,
 * `serve`, `retry`, `rejudge`): the configured `REDIS_URL`; without one, the private Redis of
 * `vcfleet run` in this state folder when it has data (started for this command when no other command
 * runs it), else the default URL. So the advice a run of `vcfleet run` ends with works without a
 * REDIS_URL, as it was run. A Redis that refuses the connection fails the command at once (exit 2).
 */
import net from 'node:net';
import path from 'node:path';
import { ConfigError } from '../shared/errors.ts';
import type { Config } from '../shared/config/load.ts';
import type { Logger } from '../shared/logger.ts';
import { resolveRedisEndpoint, type ConnectionRole, type Redis } from '../shared/redis/connect.ts';
import { RunStore } from '../shared/stores/run-store.ts';
import { hasPrivateRedisData, openPrivateRedis, type PrivateRedis } from '../all-in-one/private-redis.ts';
import { connect, redisUrl } from './runtime.ts';

export interface RunRedis {
  redis: Redis;
  /** The private Redis's loopback URL when the run is there; null: the Redis the config names. */
  url: string | null;
  /** Disconnect, and stop the private Redis if this command started it. */
  close(): Promise<void>;
}

/** The private Redis of this state folder, when no Redis is configured and it has data; connected (started if needed). */
async function privateRedisOf(config: Config, logger: Logger, role: ConnectionRole): Promise<(RunRedis & { url: string; dir: string }) | null> {
  const dir = path.join(config.state_dir, 'redis');
  if (isConfigured(config) || !hasPrivateRedisData(dir)) return null;
  const own: PrivateRedis = await openPrivateRedis({ dir, logger });
  const redis = await connect({ ...config, redis_url: own.url }, logger, role).catch(async (err: unknown) => {
    await own.stop();
    throw err;
  });
  return { redis, url: own.url, dir, close: async () => { redis.disconnect(); await own.stop(); } };
}

function isConfigured(config: Config): boolean {
  return Boolean(config.redis_url || config.redis.sentinels.length > 0 || config.redis.cluster);
}

/** Exit 2 at once when nothing listens where one Redis server is configured (connection refused), naming it and what to do. */
export async function refuseClosedRedis(config: Config, privateDir: string): Promise<void> {
  const endpoint = resolveRedisEndpoint(config);
  if (endpoint.kind !== 'single') return;
  let target: URL;
  try {
    target = new URL(endpoint.url);
  } catch {
    return;
  }
  const port = Number(target.port || 6379);
  const host = target.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  const refused = await new Promise<boolean>((resolve) => {
    const socket = net.connect(port, host);
    const done = (value: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(value);
    };
    const timer = setTimeout(() => done(false), 3000);
    socket.once('connect', () => done(false));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code === 'ECONNREFUSED'));
  });
  if (!refused) return;
  const where = isConfigured(config) ? 'REDIS_URL / redis_url' : `the default (no REDIS_URL, and no private Redis with data under ${privateDir})`;
  throw new ConfigError(`no Redis at ${endpoint.display} (connection refused; from ${where}): start it, set REDIS_URL to the fleet's Redis, or run this from the folder where \`vcfleet run\` kept its runs`);
}

export async function connectToRun(config: Config, logger: Logger, runId: string, role: ConnectionRole = 'client'): Promise<RunRedis> {
  const own = await privateRedisOf(config, logger, role);
  if (own) {
    if (await new RunStore(own.redis, config.queues.prefix).getRun(runId)) {
      logger.debug({ run_id: runId, dir: own.dir }, 'the run is in the private Redis of this state folder');
      return own;
    }
    await own.close();
  }
  await refuseClosedRedis(config, path.join(config.state_dir, 'redis'));
  const redis = await connect(config, logger, role);
  // Without a private Redis holding the run, the configured one (the default URL when none is).
  return { redis, url: isConfigured(config) ? null : redisUrl(config), close: async () => void redis.disconnect() };
}

/**
 * The Redis whose runs `vcfleet runs` lists: the configured one; without one, the private Redis of
 * this state folder when it has data (where `vcfleet run` without REDIS_URL keeps its runs), else
 * the default URL. `where` names it for the listing.
 */
export async function connectToRuns(config: Config, logger: Logger, role: ConnectionRole = 'client'): Promise<RunRedis & { where: string }> {
  const own = await privateRedisOf(config, logger, role);
  if (own) return { ...own, where: `the private Redis of ${own.dir} (vcfleet run without REDIS_URL; set REDIS_URL to list another)` };
  await refuseClosedRedis(config, path.join(config.state_dir, 'redis'));
  const redis = await connect(config, logger, role);
  return { redis, url: null, where: resolveRedisEndpoint(config).display, close: async () => void redis.disconnect() };
}
