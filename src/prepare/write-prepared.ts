/**
 * Writing a prepared benchmark without ever leaving half of one behind: everything goes into a
 * hidden sibling folder `<data_dir>/.<benchmark>.tmp-<random>`, `manifest.json` is written last,
 * and the folder is renamed into place (replacing an older one) only when complete.
 */
import { randomBytes } from 'node:crypto';
import { appendFile, mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Manifest, PreparedTask } from '../shared/records/task.ts';

export const TASKS_FILE = 'tasks.jsonl';
export const MANIFEST_FILE = 'manifest.json';
export const IMAGES_DIR = 'images';

export interface PreparedWriter {
  /** The temporary folder being filled. */
  stagingDir: string;
  /** Where the folder lands on `commit`. */
  finalDir: string;
  /** Write a task's image unless an identical one (same SHA-256) is already there. */
  addImage(task: PreparedTask, bytes: Uint8Array): Promise<void>;
  /** Append tasks to `tasks.jsonl`, one JSON object per line. */
  addTasks(tasks: readonly PreparedTask[]): Promise<void>;
  /** Number of distinct images written. */
  imageCount(): number;
  /** Write the manifest (last), then move the folder into place. */
  commit(manifest: Manifest): Promise<void>;
  /** Remove the temporary folder. Safe to call after a commit or twice. */
  abort(): Promise<void>;
}

function randomSuffix(): string {
  return randomBytes(6).toString('hex');
}

async function exists(p: string): Promise<boolean> {
  return stat(p).then(() => true, () => false);
}

/**
 * Move `from` to `to`, replacing a folder already at `to`: the old one is first renamed aside, so
 * a failure puts it back and a reader never sees a mix of the two.
 */
export async function replaceDir(from: string, to: string): Promise<void> {
  if (!(await exists(to))) {
    await rename(from, to);
    return;
  }
  const aside = path.join(path.dirname(to), `.${path.basename(to)}.old-${randomSuffix()}`);
  await rename(to, aside);
  try {
    await rename(from, to);
  } catch (err) {
    await rename(aside, to);
    throw err;
  }
  await rm(aside, { recursive: true, force: true });
}

/** Start a preparation of `benchmark` under `dataDir` in a fresh temporary folder. */
export async function createPreparedWriter(dataDir: string, benchmark: string): Promise<PreparedWriter> {
  const finalDir = path.join(dataDir, benchmark);
  const stagingDir = path.join(dataDir, `.${benchmark}.tmp-${randomSuffix()}`);
  await mkdir(path.join(stagingDir, IMAGES_DIR), { recursive: true });
  await writeFile(path.join(stagingDir, TASKS_FILE), '');
  const written = new Set<string>();
  let committed = false;
  return {
    stagingDir,
    finalDir,
    async addImage(task, bytes) {
      if (written.has(task.image_file)) return;
      await writeFile(path.join(stagingDir, task.image_file), bytes, { flag: 'wx' });
      written.add(task.image_file);
    },
    async addTasks(tasks) {
      if (tasks.length === 0) return;
      await appendFile(path.join(stagingDir, TASKS_FILE), tasks.map((t) => `${JSON.stringify(t)}\n`).join(''));
    },
    imageCount: () => written.size,
    async commit(manifest) {
      await writeFile(path.join(stagingDir, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
      await replaceDir(stagingDir, finalDir);
      committed = true;
    },
    async abort() {
      if (!committed) await rm(stagingDir, { recursive: true, force: true });
    },
  };
}
