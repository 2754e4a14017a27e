/**
 * A private redis-server for one benchmark run, on a free loopback port, persisting nothing, so
 * that measurements see no other traffic. Whoever starts it stops it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort } from '../../src/all-in-one/private-redis.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export interface BenchRedis {
  url: string;
  port: number;
  /** `INFO memory` used_memory, in bytes. */
  usedMemory(): Promise<number>;
  stop(): Promise<void>;
}

/** `extraArgs`: more redis-server options, e.g. `['--maxclients', '20000']` (benchmark 15). */
export async function startBenchRedis(extraArgs: string[] = []): Promise<BenchRedis> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction', ...extraArgs],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const url = `redis://127.0.0.1:${port}`;
  const admin = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  admin.on('error', () => {}); // refused until the server listens; connect() reports it below
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await admin.connect();
      await admin.ping();
      break;
    } catch (err) {
      if (Date.now() > deadline || child.exitCode !== null) {
        child.kill('SIGKILL');
        throw new Error(`redis-server on port ${port} did not start: ${(err as Error).message}`);
      }
      admin.disconnect();
      await sleep(100);
    }
  }
  return {
    url,
    port,
    async usedMemory() {
      const info = await admin.info('memory');
      return Number(/used_memory:(\d+)/.exec(info)![1]);
    },
    async stop() {
      admin.disconnect();
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
