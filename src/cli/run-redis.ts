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
  /** The URL it answers on (a private Redis's loopback one). */
  url: string;
  /** Disconnect, and stop the private Redis if this command started it. */
  close(): Promise<void>;
}

export async function connectToRun(config: Config, logger: Logger, runId: string, role: ConnectionRole = 'client'): Promise<RunRedis> {
  const dir = path.join(config.state_dir, 'redis');
  if (!config.redis_url && hasPrivateRedisData(dir)) {
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
  return { redis, url: redisUrl(config), close: async () => void redis.disconnect() };
}
