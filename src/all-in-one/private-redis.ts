/**
 * The private Redis of `vcfleet run` when no REDIS_URL is configured: a `redis-server` child with
 * append-only persistence and `noeviction`, its files under the state folder, so that a stopped run
 * can be resumed with `--run-id`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { InfraError } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export interface PrivateRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new InfraError(`redis-server exited with code ${child.exitCode} at start`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(100);
  }
  throw new InfraError(`redis-server did not listen on port ${port} within ${timeoutMs} ms`);
}

export interface PrivateRedisOptions {
  /** Folder for the AOF and the log. */
  dir: string;
  port?: number;
  redisServerPath?: string;
  logger: Logger;
}

export async function startPrivateRedis(options: PrivateRedisOptions): Promise<PrivateRedis> {
  mkdirSync(options.dir, { recursive: true });
  const port = options.port ?? (await freePort());
  const args = [
    '--port', String(port), '--bind', '127.0.0.1', '--dir', path.resolve(options.dir),
    '--appendonly', 'yes', '--appendfsync', 'everysec', '--maxmemory-policy', 'noeviction', '--save', '',
    '--logfile', 'redis.log', '--daemonize', 'no',
  ];
  // Its own process group: a terminal's Ctrl-C must not stop Redis under the run that is handing its jobs back.
  const child = spawn(options.redisServerPath ?? 'redis-server', args, { stdio: 'ignore', detached: true });
  const spawned = await new Promise<Error | null>((resolve) => {
    child.once('spawn', () => resolve(null));
    child.once('error', resolve);
  });
  if (spawned) {
    throw new InfraError(`cannot start redis-server (${spawned.message}): install it (apt-get install redis-server) or set REDIS_URL`);
  }
  // A process that exits at once (a second Ctrl-C) still stops its private Redis, which it detached.
  const onExit = () => void child.kill('SIGTERM');
  process.once('exit', onExit);
  await waitForPort(port, child, 10_000);
  options.logger.info({ port, dir: options.dir }, 'started a private redis-server (appendonly, noeviction)');
  let stopping: Promise<void> | undefined;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop() {
      process.off('exit', onExit);
      stopping ??= new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 5000).unref();
      });
      return stopping;
    },
  };
}
