/**
 * What a `local` sandbox binds from the host must be readable by the uid its code runs as
 * (`sandbox_config.host_uid`, 100000, for a root worker), wherever the user put the checkout: a
 * clone in root's home (mode 0700) cannot be passed through by that uid. Such a file is copied
 * once, by content (`<cache>/<sha256>/<name>`), to a cache that only root writes and everyone may
 * read (`/var/tmp/vcfleet-readable`, mode 0755); a file the uid can already reach is used where it is.
 */
import { createHash } from 'node:crypto';
import { chmodSync, closeSync, copyFileSync, existsSync, lstatSync, mkdirSync, openSync, readSync, renameSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../../shared/errors.ts';

/** The cache's default folder: under /var/tmp (kept across reboots), else the OS temp folder. */
export function defaultReadableCache(): string {
  return path.join(existsSync('/var/tmp') ? '/var/tmp' : os.tmpdir(), 'vcfleet-readable');
}

/** Whether any uid ("others") can pass through every folder above `file` and read and run it. */
export function othersCanReach(file: string): boolean {
  if ((statSync(file).mode & 0o005) !== 0o005) return false;
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    if ((statSync(dir).mode & 0o001) === 0) return false;
    if (dir === path.dirname(dir)) return true;
  }
}

/** A folder of ours only: made 0755 if missing; refused when someone else owns it or may write to it. */
function ownFolder(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const st = lstatSync(dir);
  const me = process.geteuid?.() ?? st.uid;
  if (!st.isDirectory() || st.uid !== me || (st.mode & 0o022) !== 0) {
    throw new ConfigError(`${dir} must be a folder of uid ${me} that nobody else may write to (it holds what sandboxes run); remove it, or set VCFLEET_READABLE_CACHE to another folder`);
  }
  chmodSync(dir, 0o755);
}

function sha256Of(file: string): string {
  const hash = createHash('sha256');
  const buffer = Buffer.alloc(1 << 20);
  const fd = openSync(file, 'r');
  try {
    for (let n: number; (n = readSync(fd, buffer, 0, buffer.length, null)) > 0; ) hash.update(buffer.subarray(0, n));
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

const copies = new Map<string, string>();

/**
 * `file` as sandboxed code can read it: itself when others can reach it, else its copy in `cache`
 * (made once per content; a second process finds it; hashed once per process). Only a root worker
 * needs this: otherwise sandboxed code runs as the worker's own uid.
 */
export function sandboxReadable(file: string, cache = process.env.VCFLEET_READABLE_CACHE || defaultReadableCache(), asRoot = process.geteuid?.() === 0): string {
  if (!asRoot || othersCanReach(file)) return file;
  const key = `${file}\0${cache}`;
  const known = copies.get(key);
  if (known && existsSync(known)) return known;
  ownFolder(cache);
  const dir = path.join(cache, sha256Of(file));
  ownFolder(dir);
  const target = path.join(dir, path.basename(file));
  if (!existsSync(target) || statSync(target).size !== statSync(file).size) {
    const part = `${target}.${process.pid}.part`;
    copyFileSync(file, part);
    chmodSync(part, 0o755);
    renameSync(part, target);
  }
  copies.set(key, target);
  return target;
}
