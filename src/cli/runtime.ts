/** Process plumbing shared by the long-running commands: Redis from config, signals, stdout tables, the --port flag. */
import { ConfigError } from '../shared/errors.ts';
import type { Config } from '../shared/config/load.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import type { InFlightJobs } from '../shared/queue/in-flight-jobs.ts';
import type { Logger } from '../shared/logger.ts';
import { checkRedisDeployment, checkRedisServer, createRedis, DEFAULT_REDIS_URL, resolveRedisEndpoint, waitForRedis, type ConnectionRole, type Redis } from '../shared/redis/connect.ts';
import { watchRedisHealth } from '../shared/redis/health.ts';
import { singleSeedWarning } from '../shared/redis/cluster-seeds.ts';
import { printAboveBar } from '../shared/text/terminal-screen.ts';

/** A `--port` flag as a number (undefined when not given); anything but 0-65535 is a ConfigError naming it. */
export function portFlag(raw: string | undefined): number | undefined {
  const port = raw === undefined ? undefined : Number(raw);
  if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535)) {
    throw new ConfigError(`--port must be a port number (0-65535), not "${raw}"`);
  }
  return port;
}

export function redisUrl(config: Config): string {
  return config.redis_url ?? DEFAULT_REDIS_URL;
}

/**
 * Connect (one server, a Sentinel-watched primary or a Cluster, from the config), wait for the server,
 * and check it suits a job queue. A worker connection logs its losses once per state change and stops
 * the process at once on an answer Redis will repeat (MOVED, CROSSSLOT, NOAUTH), naming the fix.
 */
export async function connect(config: Config, logger: Logger, role: ConnectionRole): Promise<Redis> {
  const endpoint = resolveRedisEndpoint(config);
  const redis = createRedis(endpoint, role);
  try {
    await waitForRedis(redis, endpoint, config.redis.connect_timeout_s * 1000);
    await checkRedisDeployment(redis, endpoint, config.queues.prefix);
    await checkRedisServer(redis, logger, role === 'worker');
    if (role === 'worker') watchRedisHealth(redis, { logger, display: endpoint.display, onFatal: stopOnFatal });
    const oneSeed = role === 'worker' && endpoint.kind === 'cluster' ? singleSeedWarning(endpoint.nodes) : null;
    if (oneSeed) logger.warn(oneSeed);
  } catch (err) {
    redis.disconnect();
    throw err;
  }
  return redis;
}

/**
 * An answer Redis will repeat: the line naming the fix is logged; exit 1 through the usual shutdown
 * (the SIGTERM path: held jobs handed back), at most 5 s later whatever Redis does.
 */
export function stopOnFatal(): void {
  process.exitCode = 1;
  setTimeout(() => process.exit(1), 5000).unref();
  process.kill(process.pid, 'SIGTERM');
}

/**
 * Once a process released everything, it should end by itself; a client library may still hold a
 * socket it opened while shutting down (ioredis's Cluster refreshing its slots during a failover), so
 * exit at most `ms` later anyway. The timer does not keep the process alive.
 */
export function exitSoon(ms = 2000): void {
  setTimeout(() => process.exit(), ms).unref();
}

export interface ShutdownOptions {
  /** How to resume, printed with the first signal. */
  hint?(): string;
  /** The jobs this process holds: handed back to their queues before a second signal exits. */
  inFlight?: InFlightJobs;
  /** What the first signal says the process does (default: rollouts going back to the queue); a process that holds no job says what it stops. */
  stopping?: string;
}

/**
 * The first SIGINT or SIGTERM (a terminal's Ctrl-C) aborts the returned signal and runs `stop`: the
 * command stops taking jobs and hands running ones back to the queue, attempts kept. A second one
 * exits at once (exit 130) after handing every held job back the same way (at most 3 s; a job it
 * could not move comes back when its lock expires, still without spending an attempt); every sandbox
 * dies with this process (bwrap's --die-with-parent).
 */
export function onShutdownSignals(logger: Logger, stop: () => Promise<void>, options: ShutdownOptions = {}): AbortSignal {
  const controller = new AbortController();
  let count = 0;
  const handler = (sig: NodeJS.Signals) => {
    count++;
    if (count === 2) {
      void exitNow(logger, sig, options.inFlight);
      return;
    }
    if (count > 2) return;
    const more = options.hint?.() ?? '';
    const what = options.stopping ?? 'stopping; running rollouts go back to the queue with their attempts kept';
    printAboveBar(`${sig}: ${what}${more ? `; ${more}` : ''} (Ctrl-C again to quit at once)\n`);
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

async function exitNow(logger: Logger, sig: NodeJS.Signals, inFlight: InFlightJobs | undefined): Promise<never> {
  const held = inFlight?.size ?? 0;
  const moved = inFlight ? await Promise.race([inFlight.handBack(logger), sleep(3000).then(() => -1)]) : 0;
  const rest = moved < 0 ? `; the ${held} held jobs come back when their locks expire` : moved < held ? `; ${held - moved} ended meanwhile` : '';
  printAboveBar(`second ${sig}: exiting now; ${Math.max(moved, 0)} running jobs handed back to the queue, attempts kept${rest}\n`);
  process.exit(130);
}

/** A plain aligned table for the terminal. */
export function table(rows: Array<Array<string | number>>): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => String(c ?? '').padEnd(widths[i])).join('  ').trimEnd()).join('\n');
}
