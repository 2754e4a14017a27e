/** Process plumbing shared by the long-running commands: Redis from config, signals, stdout tables. */
import type { Config } from '../shared/config.ts';
import type { Logger } from '../shared/logger.ts';
import { checkRedisServer, createRedis, DEFAULT_REDIS_URL, waitForRedis, type ConnectionRole, type Redis } from '../shared/redis.ts';

export function redisUrl(config: Config): string {
  return config.redis_url ?? DEFAULT_REDIS_URL;
}

/** Connect, wait for the server, and check it suits a job queue. */
export async function connect(config: Config, logger: Logger, role: ConnectionRole): Promise<Redis> {
  const url = redisUrl(config);
  const redis = createRedis(url, role);
  try {
    await waitForRedis(redis, url);
    await checkRedisServer(redis, logger, role === 'worker');
  } catch (err) {
    redis.disconnect();
    throw err;
  }
  return redis;
}

/**
 * Run `stop` on the first SIGINT or SIGTERM (graceful); a second signal exits at once.
 * Returns an AbortSignal that fires on the first signal.
 */
export function onShutdownSignals(logger: Logger, stop: () => Promise<void>): AbortSignal {
  const controller = new AbortController();
  let count = 0;
  const handler = (sig: NodeJS.Signals) => {
    count++;
    if (count > 1) {
      logger.warn(`second ${sig}: exiting now`);
      process.exit(130);
    }
    logger.info(`${sig} received: finishing cleanly (press Ctrl-C again to exit at once)`);
    controller.abort();
    stop().then(
      () => undefined,
      (err) => logger.error({ err: (err as Error).message }, 'error while shutting down'),
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return controller.signal;
}

/** A plain aligned table for the terminal. */
export function table(rows: Array<Array<string | number>>): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => String(c ?? '').padEnd(widths[i])).join('  ').trimEnd()).join('\n');
}
