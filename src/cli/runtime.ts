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
 * The first SIGINT or SIGTERM (a terminal's Ctrl-C) aborts the returned signal and runs `stop`: the
 * command stops taking jobs and hands running ones back to the queue, attempts kept. A second one
 * exits at once (exit 130): jobs still held come back when their locks expire, attempts kept, and
 * every sandbox dies with this process. `hint` is printed with the first (how to resume).
 */
export function onShutdownSignals(logger: Logger, stop: () => Promise<void>, hint: () => string = () => ''): AbortSignal {
  const controller = new AbortController();
  let count = 0;
  const handler = (sig: NodeJS.Signals) => {
    count++;
    if (count > 1) {
      logger.warn(`second ${sig}: exiting now; jobs still held go back to the queue when their locks expire`);
      process.exit(130);
    }
    const more = hint();
    process.stderr.write(`\n${sig}: stopping; running rollouts go back to the queue with their attempts kept${more ? `; ${more}` : ''} (Ctrl-C again to quit at once)\n`);
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
