/**
 * Maps a path inside a `local` sandbox (under its workdir or `/tmp`) to the host folder behind it,
 * refusing every path that could escape: `..` segments, other sandbox paths, and symlinks (which the
 * sandboxed code may have planted) that resolve outside the folder.
 */
import { lstat, mkdir, realpath } from 'node:fs/promises';
import path from 'node:path';
import { DataError } from '../../shared/errors.ts';

export interface PathMount {
  /** Absolute folder inside the sandbox. */
  inSandbox: string;
  /** Host folder bound there. */
  host: string;
}

export interface HostPath {
  /** The host folder the file must stay in. */
  base: string;
  /** The host path of the file (not yet checked against symlinks). */
  file: string;
}

/** Pure mapping; throws DataError for `..` or a path outside every mount. */
export function mapSandboxPath(pathInSandbox: string, workdir: string, mounts: readonly PathMount[]): HostPath {
  if (pathInSandbox.split('/').includes('..')) {
    throw new DataError(`sandbox path "${pathInSandbox}" contains "..": refused`);
  }
  const abs = path.posix.resolve(workdir, pathInSandbox);
  for (const m of mounts) {
    if (abs === m.inSandbox) throw new DataError(`sandbox path "${pathInSandbox}" is a folder, not a file`);
    if (abs.startsWith(`${m.inSandbox}/`)) {
      return { base: m.host, file: path.join(m.host, abs.slice(m.inSandbox.length + 1)) };
    }
  }
  const allowed = mounts.map((m) => m.inSandbox).join(' and ');
  throw new DataError(`sandbox path "${pathInSandbox}" is outside ${allowed}: refused`);
}

function isInside(base: string, p: string): boolean {
  return p === base || p.startsWith(`${base}/`);
}

async function assertResolvesInside(base: string, p: string, original: string): Promise<string> {
  const [realBase, real] = await Promise.all([
    realpath(base),
    realpath(p).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
      throw new DataError(`sandbox path "${original}" does not exist (or is a dangling symlink)`);
    }),
  ]);
  if (!isInside(realBase, real)) {
    throw new DataError(`sandbox path "${original}" resolves outside the sandbox (symlink): refused`);
  }
  return real;
}

/** The real host path of an existing file to read, checked to stay inside its folder. */
export async function resolveForRead(target: HostPath, original: string): Promise<string> {
  return assertResolvesInside(target.base, target.file, original);
}

async function deepestExisting(p: string): Promise<string> {
  let cur = p;
  for (;;) {
    try {
      await lstat(cur);
      return cur;
    } catch {
      cur = path.dirname(cur);
    }
  }
}

/**
 * The host path to write, after creating missing parent folders. Every existing component is
 * checked before anything is created, so a planted symlink cannot make us write outside.
 */
export async function resolveForWrite(target: HostPath, original: string): Promise<string> {
  const parent = path.dirname(target.file);
  await assertResolvesInside(target.base, await deepestExisting(parent), original);
  await mkdir(parent, { recursive: true });
  const realParent = await assertResolvesInside(target.base, parent, original);
  const file = path.join(realParent, path.basename(target.file));
  const st = await lstat(file).catch(() => null);
  if (st?.isSymbolicLink()) return assertResolvesInside(target.base, file, original);
  return file;
}
