/** The Judge a judge-worker uses, with its verdict cache in Redis (shared by the whole fleet; each run's `judge.cache` says whether it uses it). */
import type { Redis } from 'ioredis';
import type { Config } from '../../shared/config/load.ts';
import type { Judge } from '../../shared/ports/judge.ts';
import type { Logger } from '../../shared/logger.ts';
import { createRedisJudgeCache } from './judge-cache.ts';
import { createJudge } from './openai-judge.ts';

export function createFleetJudge(config: Config, logger: Logger, redis: Redis): Judge {
  return createJudge({ config, logger, cache: createRedisJudgeCache(redis, config.queues.prefix) });
}
