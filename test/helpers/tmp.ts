/** Temporary folders for tests: `createTmpDir()` in a test, `removeTmpDirs()` in `afterEach`. */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const created: string[] = [];

/** A fresh empty folder under the OS temp dir, removed by the next `removeTmpDirs()`. */
export function createTmpDir(prefix = 'vcfleet-test-'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  created.push(dir);
  return dir;
}

/** Remove every folder made by `createTmpDir` so far. */
export function removeTmpDirs(): void {
  for (const dir of created.splice(0)) rmSync(dir, { recursive: true, force: true });
}
