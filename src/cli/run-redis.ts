/**
 * The Redis that holds a run, for the commands that operate one (`status`, `retry`, `rejudge`): the
 * configured `REDIS_URL`; without one, the private Redis of `vcfleet run` in this state folder when
 * it holds the run (started for this command when no other command runs it), else the default URL.
 * So the advice a run of `vcfleet run` ends with works without a REDIS_URL, as it was run.
 */
import path from 'node:path';
import type { Config } from '../shared/config.ts';
import type { Logger } from '../shared/logger.ts';
import type { ConnectionRole, Redis } from '../shared/redis.ts';
import { RunStore } from '../shared/run-store.ts';
import { hasPrivateRedisData, openPrivateRedis, type PrivateRedis } from '../all-in-one/private-redis.ts';
import { connect, redisUrl } from './runtime.ts';

export interface RunRedis {
  redis: Redis;
  /** The private Redis's loopback URL when the run is there; null: the Redis the config names. */
  url: string | null;
  /** Disconnect, and stop the private Redis if this command started it. */
  close(): Promise<void>;
}

export async function connectToRun(config: Config, logger: Logger, runId: string, role: ConnectionRole = 'client'): Promise<RunRedis> {
  const dir = path.join(config.state_dir, 'redis');
  const configured = config.redis_url || config.redis.sentinels.length > 0 || config.redis.cluster;
  if (!configured && hasPrivateRedisData(dir)) {
    const own: PrivateRedis = await openPrivateRedis({ dir, logger });
    const redis = await connect({ ...config, redis_url: own.url }, logger, role).catch(async (err: unknown) => {
      await own.stop();
      throw err;
    });
    if (await new RunStore(redis, config.queues.prefix).getRun(runId)) {
      logger.debug({ run_id: runId, dir }, 'the run is in the private Redis of this state folder');
      return { redis, url: own.url, close: async () => { redis.disconnect(); await own.stop(); } };
    }
    redis.disconnect();
    await own.stop();
  }
  const redis = await connect(config, logger, role);
  // Without a private Redis holding the run, the configured one (the default URL when none is).
  return { redis, url: configured ? null : redisUrl(config), close: async () => void redis.disconnect() };
}

/**
 * The Redis whose runs `vcfleet runs` lists: the configured one; without one, the private Redis of
 * this state folder when it has data (where `vcfleet run` without REDIS_URL keeps its runs), else
 * the default URL. `where` names it for the listing.
 */
export async function connectToRuns(config: Config, logger: Logger): Promise<RunRedis & { where: string }> {
  const dir = path.join(config.state_dir, 'redis');
  const configured = config.redis_url || config.redis.sentinels.length > 0 || config.redis.cluster;
  if (!configured && hasPrivateRedisData(dir)) {
    const own = await openPrivateRedis({ dir, logger });
    const redis = await connect({ ...config, redis_url: own.url }, logger, 'client').catch(async (err: unknown) => {
      await own.stop();
      throw err;
    });
    return { redis, url: own.url, where: `the private Redis of ${dir} (vcfleet run without REDIS_URL; set REDIS_URL to list another)`, close: async () => { redis.disconnect(); await own.stop(); } };
  }
  const redis = await connect(config, logger, 'client');
  return { redis, url: null, where: redisUrl(config), close: async () => void redis.disconnect() };
}
