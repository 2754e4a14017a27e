/**
 * Removes a folder tree that sandboxed code wrote, whatever it did to it: folders it made
 * unreadable or unwritable (`chmod 000`) are given back to their owner (the worker's uid, which the
 * sandbox's user namespace maps to) and removed on a second pass. Symlinks are never followed.
 */
import { chmod, lstat, readdir, rm } from 'node:fs/promises';
import path from 'node:path';

const REMOVE = { recursive: true, force: true, maxRetries: 3 } as const;

/** Makes every folder under `dir` (itself included) readable, writable and searchable by its owner. */
async function restoreAccess(dir: string): Promise<void> {
  const st = await lstat(dir).catch(() => null);
  if (!st?.isDirectory()) return;
  await chmod(dir, 0o700).catch(() => {});
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) if (e.isDirectory()) await restoreAccess(path.join(dir, e.name));
}

/** Removes `dir` and everything in it; throws only when even the second pass fails. */
export async function forceRemove(dir: string): Promise<void> {
  try {
    await rm(dir, REMOVE);
  } catch {
    await restoreAccess(dir);
    await rm(dir, REMOVE);
  }
}
