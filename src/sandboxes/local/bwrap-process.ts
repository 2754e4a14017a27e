/**
 * The bubblewrap process of a `local` sandbox command: finding bwrap, checking once that it works
 * here, running a short check command, and ending a running one with its whole PID namespace.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { InfraError } from '../../shared/errors.ts';
import { namespaceArgs } from './bwrap-policy.ts';
import { namespaceMembers, signalQuietly } from '../proc-tree.ts';

/** PATH inside the sandbox unless the spec or the exec sets one. */
export const SANDBOX_PATH = '/usr/local/bin:/usr/bin:/bin';
const INSTALL_HINT = 'install bubblewrap (`apt-get install bubblewrap`) or use sandbox_provider=opensandbox';

export function defaultBwrapPath(): string {
  return existsSync('/usr/bin/bwrap') ? '/usr/bin/bwrap' : 'bwrap';
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

/** Checks that bwrap exists and can create its namespaces here; throws InfraError with a hint. */
export async function probeBwrap(bwrapPath: string): Promise<void> {
  const args = [...namespaceArgs(), '--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev', '--', 'true'];
  try {
    await runCheck(bwrapPath, args);
  } catch (err) {
    const why =
      (err as NodeJS.ErrnoException).code === 'ENOENT'
        ? `bubblewrap not found at ${bwrapPath}`
        : `bubblewrap cannot create its namespaces here (${(err as Error).message})`;
    throw new InfraError(`local sandbox unavailable: ${why}; ${INSTALL_HINT}`, { cause: err });
  }
}
