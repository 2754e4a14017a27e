/**
 * The disk of a `local` sandbox: one size-capped tmpfs per sandbox, mounted by the worker on the host
 * (`<sandbox dir>/disk`) because every exec is its own bwrap process while the sandbox, and the files
 * the worker puts into it, persist between execs. It holds `workspace/`, `tmp/` and `shm/`, which bwrap
 * binds at the workdir, `/tmp` and `/dev/shm`: together they cannot exceed `disk_mib`, their pages are
 * charged to the sandbox's memory cgroup, and they are gone with the unmount. Mounting needs root or
 * CAP_SYS_ADMIN; without it the folders are plain host folders and the disk is not enforced.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import path from 'node:path';
import { InfraError } from '../../shared/errors.ts';
import { parseMountinfo } from '../host-cgroups.ts';

/** Below this many free bytes the sandbox disk counts as full (a write of a few pages fails). */
const FULL_BELOW_BYTES = 1024 * 1024;

function tool(name: 'mount' | 'umount'): string {
  return existsSync(`/usr/bin/${name}`) ? `/usr/bin/${name}` : `/bin/${name}`;
}

function run(file: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: 30_000 }, (err, _out, stderr) => {
      if (err) reject(new InfraError(`${path.basename(file)} ${args.join(' ')}: ${String(stderr).trim().split('\n')[0] || err.message}`, { cause: err }));
      else resolve();
    });
  });
}

/** Room on the sandbox disk for the worker's own files there (`.box/`: the entry script, the /proc masks), in KiB. */
const BOX_FILES_KIB = 64;

/** Mounts a tmpfs of `sizeMib` MiB (and the box's files) at `dir`, an existing empty folder, owned by `owner` when given; only root can. */
export function mountDisk(dir: string, sizeMib: number, owner?: number): Promise<void> {
  const ids = owner === undefined ? '' : `,uid=${owner},gid=${owner}`;
  return run(tool('mount'), ['-t', 'tmpfs', '-o', `size=${sizeMib * 1024 + BOX_FILES_KIB}k,mode=0700${ids},nosuid,nodev`, 'tmpfs', dir]);
}

/** Unmounts `dir`; when something still holds it, detaches it lazily so teardown never waits on it. */
export async function unmountDisk(dir: string): Promise<void> {
  await run(tool('umount'), [dir]).catch(() => run(tool('umount'), ['-l', dir]));
}

/** Mount points at or below `dir`, deepest first (so each can be unmounted in turn). */
export function mountsUnder(dir: string, mountinfo = '/proc/self/mountinfo'): string[] {
  let text = '';
  try {
    text = readFileSync(mountinfo, 'utf8');
  } catch {
    return [];
  }
  const base = path.resolve(dir);
  const points = parseMountinfo(text)
    .map((m) => m.mountPoint)
    .filter((p) => p === base || p.startsWith(`${base}/`));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

/** Unmounts every mount at or below `dir`; returns the ones that could not be unmounted, with why. */
export async function unmountAllUnder(dir: string, mountinfo?: string): Promise<Error[]> {
  const failed: Error[] = [];
  for (const p of mountsUnder(dir, mountinfo)) await unmountDisk(p).catch((err: Error) => failed.push(err));
  return failed;
}

/** Whether the file system at `dir` has (almost) no free space or no free inodes left. */
export async function diskIsFull(dir: string): Promise<boolean> {
  const st = await statfs(dir).catch(() => null);
  if (!st) return false;
  return st.bavail * st.bsize < FULL_BELOW_BYTES || (st.files > 0 && st.ffree === 0);
}

/**
 * Looks at a sandbox disk every `intervalMs` while commands run, so that a disk filled and then
 * emptied again between two looks at the end of commands is still seen.
 */
export class DiskWatch {
  private timer: NodeJS.Timeout | null = null;
  private running = 0;
  /** Whether the disk was ever found full. */
  full = false;

  constructor(private readonly dir: string, private readonly intervalMs: number) {}

  async check(): Promise<boolean> {
    if (!this.full && (await diskIsFull(this.dir))) this.full = true;
    return this.full;
  }

  /** A command started: look periodically until the last one ends. */
  execStarted(): void {
    if (this.running++ === 0) {
      this.timer = setInterval(() => void this.check(), this.intervalMs);
      this.timer.unref();
    }
  }

  /** A command ended: look once more (it may have just filled the disk). */
  async execEnded(): Promise<void> {
    if (--this.running === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
    await this.check();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
