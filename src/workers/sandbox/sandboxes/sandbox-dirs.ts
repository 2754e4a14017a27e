/**
 * Host folders of `local` sandboxes. Each sandbox is `<root>/<label>-<random>/` holding `disk/` (the
 * sandbox's tmpfs when the worker can mount one, see sandbox-disk.ts) with `workspace/` (the sandbox
 * workdir), `tmp/` (its `/tmp`) and `shm/` (its `/dev/shm`); `owner.json` (the worker that made it);
 * `execs/<pid>.json` (the bwrap processes running in it); and an empty file and folder that mask
 * parts of `/proc`. A worker that starts removes the folders whose owner is dead, killing any bwrap
 * process still recorded there and unmounting their disks; whatever sandboxed code did to the
 * permissions of its files cannot stop that.
 */
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { forceRemove } from './force-remove.ts';
import { identityOf, isAlive, signalQuietly, type ProcessIdentity } from './proc-tree.ts';
import { unmountAllUnder } from './sandbox-disk.ts';

/** Default parent of all sandbox folders of this host. */
export function defaultSandboxRoot(): string {
  return path.join(os.tmpdir(), 'vcfleet-sandboxes');
}

export interface SandboxDirs {
  root: string;
  /** The sandbox disk (a tmpfs mount point, or a plain folder). */
  disk: string;
  workspace: string;
  tmp: string;
  shm: string;
  execs: string;
  emptyFile: string;
  emptyDir: string;
}

/** A folder without an owner file older than this is a creation that crashed half-way. */
const UNOWNED_GRACE_MS = 10 * 60 * 1000;

function safeLabel(label: string): string {
  return label.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 60) || 'sandbox';
}

/**
 * Creates the folders of a new sandbox, owned by this process. `mountDisk`, when given, mounts the
 * sandbox disk on the empty `disk/` folder before anything is made in it.
 */
export async function createSandboxDirs(rootDir: string, label: string, mountDisk?: (dir: string) => Promise<void>): Promise<SandboxDirs> {
  await mkdir(rootDir, { recursive: true, mode: 0o700 });
  const root = await mkdtemp(path.join(rootDir, `${safeLabel(label)}-`));
  const disk = path.join(root, 'disk');
  const dirs: SandboxDirs = {
    root,
    disk,
    workspace: path.join(disk, 'workspace'),
    tmp: path.join(disk, 'tmp'),
    shm: path.join(disk, 'shm'),
    execs: path.join(root, 'execs'),
    emptyFile: path.join(root, 'empty'),
    emptyDir: path.join(root, 'empty.d'),
  };
  try {
    await writeFile(path.join(root, 'owner.json'), JSON.stringify(identityOf(process.pid)));
    await Promise.all([mkdir(disk), mkdir(dirs.execs), writeFile(dirs.emptyFile, ''), mkdir(dirs.emptyDir, { mode: 0o555 })]);
    if (mountDisk) await mountDisk(disk);
    await Promise.all([mkdir(dirs.workspace), mkdir(path.join(dirs.tmp, 'home'), { recursive: true }), mkdir(dirs.shm)]);
  } catch (err) {
    await removeAll(root).catch(() => {});
    throw err;
  }
  return dirs;
}

/** Records a running bwrap process so that a later worker can kill it if this one dies. */
export async function recordExec(dirs: SandboxDirs, pid: number): Promise<void> {
  const id = identityOf(pid);
  if (id) await writeFile(path.join(dirs.execs, `${pid}.json`), JSON.stringify(id));
}

export async function forgetExec(dirs: SandboxDirs, pid: number): Promise<void> {
  await rm(path.join(dirs.execs, `${pid}.json`), { force: true });
}

async function readIdentity(file: string): Promise<ProcessIdentity | null> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as ProcessIdentity;
  } catch {
    return null;
  }
}

/** SIGKILLs every recorded bwrap process that still runs (its namespace dies with it). */
async function killRecordedExecs(execsDir: string): Promise<void> {
  const names = await readdir(execsDir).catch(() => [] as string[]);
  for (const name of names) {
    const id = await readIdentity(path.join(execsDir, name));
    if (id && isAlive(id)) signalQuietly(id.pid, 'SIGKILL');
  }
}

/** Whether the folder belongs to a worker of this host that is gone. */
async function isOrphan(dir: string): Promise<boolean> {
  const owner = await readIdentity(path.join(dir, 'owner.json'));
  if (owner) return owner.hostname === os.hostname() && !isAlive(owner);
  const st = await stat(dir).catch(() => null);
  return st !== null && Date.now() - st.mtimeMs > UNOWNED_GRACE_MS;
}

/** Kills what is recorded there, unmounts the disk and removes everything; throws what failed. */
async function removeAll(root: string): Promise<void> {
  await killRecordedExecs(path.join(root, 'execs'));
  const unmountErrors = await unmountAllUnder(root);
  await forceRemove(root).catch((err: unknown) => {
    throw unmountErrors[0] ?? err;
  });
}

/**
 * Removes the sandbox folders of dead workers of this host; returns their names (the sandbox ids).
 * A folder that cannot be removed is reported to `onError` and the others are still removed.
 */
export async function reapOrphanDirs(rootDir: string, onError: (dir: string, err: unknown) => void = () => {}): Promise<string[]> {
  const entries = await readdir(rootDir, { withFileTypes: true }).catch(() => []);
  const reaped: string[] = [];
  for (const entry of entries) {
    if (!entry.isDirectory()) continue;
    const dir = path.join(rootDir, entry.name);
    if (!(await isOrphan(dir))) continue;
    try {
      await removeAll(dir);
      reaped.push(entry.name);
    } catch (err) {
      onError(dir, err);
    }
  }
  return reaped;
}

/** Kills what still runs, unmounts the disk and removes the folders (idempotent). */
export async function removeSandboxDirs(dirs: SandboxDirs): Promise<void> {
  await removeAll(dirs.root);
}
