/** Temporary folders for tests: `createTmpDir()` in a test, `removeTmpDirs()` in `afterEach`. */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const created: string[] = [];

/**
 * A fresh empty folder under the OS temp dir, removed by the next `removeTmpDirs()`. Others may pass
 * through it (0711), as a root worker's sandboxes (an unprivileged host uid) must to reach a root under it.
 */
export function createTmpDir(prefix = 'vcfleet-test-'): string {
  const dir = passableTmpDir(prefix);
  created.push(dir);
  return dir;
}

/** Remove every folder made by `createTmpDir` so far. */
export function removeTmpDirs(): void {
  for (const dir of created.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/**
 * A fresh folder under the OS temp dir that other users may pass through (0711): what a root
 * worker's sandboxes need above their root, since they run as an unprivileged host uid.
 */
export function passableTmpDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  chmodSync(dir, 0o711);
  return dir;
}
