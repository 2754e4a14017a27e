/**
 * The bubblewrap process of a `local` sandbox command: finding bwrap, checking once that it works
 * here, running a short check command, and ending a running one with its whole PID namespace.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { InfraError } from '../../shared/errors.ts';
import { namespaceArgs } from './bwrap-policy.ts';
import { namespaceMembers, signalQuietly } from '../proc-tree.ts';

/** PATH inside the sandbox unless the spec or the exec sets one. */
export const SANDBOX_PATH = '/usr/local/bin:/usr/bin:/bin';
const INSTALL_HINT = 'install it with `apt-get install bubblewrap` (Debian/Ubuntu), or use ++sandbox_provider=opensandbox';

/**
 * The bubblewrap binary: `VCFLEET_BWRAP` when set (a host's own build), else `/usr/bin/bwrap`, else
 * the first `bwrap` on the PATH, as an absolute path (the sandbox launcher takes no other); `bwrap`
 * when there is none, which probeBwrap then reports as not installed.
 */
export function defaultBwrapPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.VCFLEET_BWRAP) return env.VCFLEET_BWRAP;
  if (existsSync('/usr/bin/bwrap')) return '/usr/bin/bwrap';
  const found = (env.PATH ?? '').split(':').filter((dir) => path.isAbsolute(dir)).map((dir) => path.join(dir, 'bwrap')).find((file) => existsSync(file));
  return found ?? 'bwrap';
}

function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (hasExited(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(hasExited(child)), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * SIGTERM every process of the bwrap's PID namespace, then, if the command has not exited within
 * the grace, SIGKILL the bwrap itself: its namespace init dies with it (`--die-with-parent`), and
 * with the init the kernel kills every process left in the namespace.
 */
export async function terminateBwrap(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.pid === undefined || hasExited(child)) return;
  for (const pid of namespaceMembers(child.pid)) signalQuietly(pid, 'SIGTERM');
  if (!(await waitForExit(child, graceMs))) child.kill('SIGKILL');
}

/**
 * Runs a short check command to its end; `fds` are written, then closed, to the child's fds 3, 4, ...
 * Resolves with the stderr text on exit 0; rejects with the error (ENOENT code kept) otherwise.
 */
export function runCheck(command: string, args: string[], fds: Buffer[] = []): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { PATH: SANDBOX_PATH }, stdio: ['ignore', 'ignore', 'pipe', ...fds.map(() => 'pipe' as const)] });
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    fds.forEach((buf, i) => {
      const stream = child.stdio[3 + i] as NodeJS.WritableStream;
      stream.on('error', () => {});
      stream.end(buf);
    });
    child.once('error', (err) => (clearTimeout(timer), reject(err)));
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(stderr);
      else reject(new Error(stderr.trim() || `${command} ended with ${signal ?? `exit ${code}`}`));
    });
  });
}

/** Whether probeBwrap failed (or its error was caused) because there is no bwrap where it looked. */
export function bwrapMissing(err: unknown): boolean {
  const e = err as NodeJS.ErrnoException | undefined;
  return e?.code === 'ENOENT' || (e?.cause as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
}

/** Checks that bwrap exists and can create its namespaces here; throws InfraError with a hint. */
export async function probeBwrap(bwrapPath: string): Promise<void> {
  const args = [...namespaceArgs(), '--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev', '--', 'true'];
  try {
    await runCheck(bwrapPath, args);
  } catch (err) {
    // Not installed: a set-up step left out, said in one line with its apt package.
    if (bwrapMissing(err)) {
      const where = path.isAbsolute(bwrapPath) ? `no ${bwrapPath}` : `no ${bwrapPath} on the PATH`;
      throw new InfraError(`bubblewrap is not installed (${where}): the local sandboxes need it; ${INSTALL_HINT}`, { cause: err });
    }
    throw new InfraError(`local sandbox unavailable: bubblewrap cannot create its namespaces here (${(err as Error).message}); ${INSTALL_HINT}`, { cause: err });
  }
}
