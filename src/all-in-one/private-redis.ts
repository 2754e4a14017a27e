/**
 * The private Redis of `vcfleet run` when no REDIS_URL is configured: a `redis-server` child with
 * append-only persistence and `noeviction`, its files under the state folder, so that a stopped run
 * can be resumed with `--run-id`, and operated afterwards (`status`, `retry`, `rejudge`) from the
 * same folder. It writes where it listens to `server.json` there; a second command on the same folder
 * while it runs uses it instead of starting another server on the same files (openPrivateRedis).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { InfraError } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export interface PrivateRedis {
  url: string;
  port: number;
  /** This process started it (and stops it); false when it uses one another process runs. */
  started: boolean;
  stop(): Promise<void>;
}

const SERVER_FILE = 'server.json';

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

/** Whether the private Redis folder holds data of an earlier run (its append-only files). */
export function hasPrivateRedisData(dir: string): boolean {
  try {
    return readdirSync(dir).some((e) => e.startsWith('appendonly'));
  } catch {
    return false;
  }
}

/** Whether a Redis answers PING on the port within a second. */
function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), 1000);
    let said = '';
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      said += d.toString('utf8');
      if (said.includes('\r\n')) done(said.startsWith('+PONG'));
    });
    socket.on('error', () => done(false));
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The private Redis another process of this folder runs now, or null. */
async function runningIn(dir: string): Promise<{ port: number; pid: number } | null> {
  try {
    const { port, pid } = JSON.parse(readFileSync(path.join(dir, SERVER_FILE), 'utf8')) as { port: number; pid: number };
    if (Number.isInteger(port) && Number.isInteger(pid) && alive(pid) && (await answersPing(port))) return { port, pid };
  } catch {
    // no server file, or one a crash left
  }
  return null;
}

const USERS = 'users';

/** Count this process as a user of the folder's private Redis (a file named by its pid under `users/`). */
function joinUsers(dir: string): void {
  mkdirSync(path.join(dir, USERS), { recursive: true });
  writeFileSync(path.join(dir, USERS, String(process.pid)), '');
}

/** Leave; true when no other live process uses the private Redis (files of dead ones are removed). */
function leaveUsers(dir: string): boolean {
  const folder = path.join(dir, USERS);
  rmSync(path.join(folder, String(process.pid)), { force: true });
  let others = 0;
  for (const name of existsSync(folder) ? readdirSync(folder) : []) {
    if (/^\d+$/.test(name) && alive(Number(name))) others++;
    else rmSync(path.join(folder, name), { force: true });
  }
  return others === 0;
}

/**
 * The private Redis of the folder, shared by every command that uses it at once: the one another
 * command runs now when there is one, else one this process starts. Each user is counted (its pid
 * under `users/`); whoever leaves last stops the server, whoever started it, so two runs side by
 * side in one folder never lose their Redis under them. Starting is serialised by a lock file, so two
 * commands started together do not start two servers on the same files.
 */
export async function openPrivateRedis(options: PrivateRedisOptions): Promise<PrivateRedis> {
  mkdirSync(options.dir, { recursive: true });
  const lock = path.join(options.dir, 'start.lock');
  const deadline = Date.now() + 20_000;
  for (;;) {
    const running = await runningIn(options.dir);
    if (running) {
      joinUsers(options.dir);
      options.logger.info({ port: running.port, pid: running.pid, dir: options.dir }, 'using the private redis-server another vcfleet command runs (shared; the last to leave stops it)');
      return { url: `redis://127.0.0.1:${running.port}`, port: running.port, started: false, stop: async () => stopIfLast(options.dir, running.pid) };
    }
    if (takeLock(lock) || Date.now() > deadline) break;
    await sleep(200);
  }
  try {
    joinUsers(options.dir);
    return await startPrivateRedis(options);
  } finally {
    rmSync(lock, { force: true });
  }
}

/** Create the lock file, or take over one whose holder died; false while a live process holds it. */
function takeLock(lock: string): boolean {
  try {
    writeFileSync(lock, String(process.pid), { flag: 'wx' });
    return true;
  } catch {
    const holder = Number(readFileSync(lock, 'utf8'));
    if (Number.isInteger(holder) && holder > 0 && alive(holder)) return false;
    rmSync(lock, { force: true });
    return false;
  }
}

/** Leave the private Redis; the last user stops the server (by its pid) and removes its server file. */
async function stopIfLast(dir: string, pid: number): Promise<void> {
  if (!leaveUsers(dir)) return;
  rmSync(path.join(dir, SERVER_FILE), { force: true });
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return; // already gone
  }
  for (let i = 0; i < 50 && alive(pid); i++) await sleep(100);
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
  // A process that exits at once (a second Ctrl-C) still stops its private Redis, which it detached, unless others use it.
  const onExit = () => void (leaveUsers(options.dir) && child.kill('SIGTERM'));
  process.once('exit', onExit);
  await waitForPort(port, child, 10_000);
  const serverFile = path.join(options.dir, SERVER_FILE);
  writeFileSync(serverFile, `${JSON.stringify({ port, pid: child.pid })}\n`);
  options.logger.info({ port, dir: options.dir }, 'started a private redis-server (appendonly, noeviction)');
  let stopping: Promise<void> | undefined;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    started: true,
    stop() {
      process.off('exit', onExit);
      // Another command uses it still: it stops it when it leaves last.
      if (!stopping && !leaveUsers(options.dir)) {
        stopping = Promise.resolve();
        child.unref();
      }
      if (!stopping && existsSync(serverFile)) rmSync(serverFile, { force: true });
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
