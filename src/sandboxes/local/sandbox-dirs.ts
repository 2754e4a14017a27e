/**
 * Host folders of `local` sandboxes. Each sandbox is `<root>/<label>-<random>/` holding `disk/` (the
 * sandbox's tmpfs when the worker can mount one, see sandbox-disk.ts) with `workspace/` (the sandbox
 * workdir), `tmp/` (its `/tmp`), `shm/` (its `/dev/shm`) and `.box/` (a copy of the entry script, and
 * an empty file and folder that mask parts of `/proc`: on the sandbox's own tmpfs, so its mount table
 * names no host path); `owner.json` (the worker that made it); `execs/<pid>.json` (the bwrap processes
 * running in it). With an `owner` uid (a root worker's sandboxes run as that host uid), what the
 * sandbox may write is that uid's, and the folders above it can be passed through but not listed.
 * A worker that starts removes the folders whose owner is dead, killing any bwrap process still
 * recorded there and unmounting their disks; whatever sandboxed code did to the permissions of its
 * files cannot stop that.
 */
import { chmod, chown, copyFile, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { forceRemove } from './force-remove.ts';
import { identityOf, isAlive, signalQuietly, type ProcessIdentity } from '../proc-tree.ts';
import { unmountAllUnder } from './sandbox-disk.ts';
import { setTimeout as sleep } from 'node:timers/promises';

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
  /** The entry script as the sandbox's commands run it (a copy on the sandbox disk). */
  entryScript: string;
  emptyFile: string;
  emptyDir: string;
}

export interface SandboxDirsOptions {
  /** Mounts the sandbox disk on the empty `disk/` folder before anything is made in it. */
  mountDisk?: (dir: string) => Promise<void>;
  /** The host uid (and gid) the sandbox runs as, when not this process's: it owns what the sandbox may write. */
  owner?: number;
  /** The entry script to copy into the sandbox (sandbox-entry.py). */
  entryScript: string;
}

/** A folder without an owner file older than this is a creation that crashed half-way. */
const UNOWNED_GRACE_MS = 10 * 60 * 1000;

function safeLabel(label: string): string {
  return label.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 60) || 'sandbox';
}

/** Creates the folders of a new sandbox, owned by this process (what the sandbox writes: by `owner`). */
export async function createSandboxDirs(rootDir: string, label: string, options: SandboxDirsOptions): Promise<SandboxDirs> {
  const { owner } = options;
  // 0711 with an owner: bwrap, running as that uid, must pass through to the folders it binds.
  const passable = owner === undefined ? 0o700 : 0o711;
  await mkdir(rootDir, { recursive: true, mode: passable });
  if (owner !== undefined) await chmod(rootDir, passable);
  const root = await mkdtemp(path.join(rootDir, `${safeLabel(label)}-`));
  const disk = path.join(root, 'disk');
  const box = path.join(disk, '.box');
  const dirs: SandboxDirs = {
    root,
    disk,
    workspace: path.join(disk, 'workspace'),
    tmp: path.join(disk, 'tmp'),
    shm: path.join(disk, 'shm'),
    execs: path.join(root, 'execs'),
    entryScript: path.join(box, 'entry.py'),
    emptyFile: path.join(box, 'empty'),
    emptyDir: path.join(box, 'empty.d'),
  };
  try {
    await chmod(root, passable);
    await writeFile(path.join(root, 'owner.json'), JSON.stringify(identityOf(process.pid)));
    await Promise.all([mkdir(disk), mkdir(dirs.execs)]);
    if (options.mountDisk) await options.mountDisk(disk);
    await mkdir(box, { mode: 0o711 });
    await Promise.all([copyFile(options.entryScript, dirs.entryScript), writeFile(dirs.emptyFile, ''), mkdir(dirs.emptyDir, { mode: 0o555 })]);
    const home = path.join(dirs.tmp, 'home');
    await Promise.all([mkdir(dirs.workspace), mkdir(home, { recursive: true }), mkdir(dirs.shm)]);
    if (owner !== undefined) {
      for (const dir of [disk, dirs.workspace, dirs.tmp, home, dirs.shm]) await chown(dir, owner, owner);
      await chmod(disk, 0o711);
    }
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

/**
 * Ends the gateway bridge of the exec `pid` (a root worker's launcher records it as `<pid>.bridge.json`):
 * it dies with bwrap (PR_SET_PDEATHSIG); this waits for that, kills it if it lingers, and forgets it.
 */
export async function stopBridge(dirs: SandboxDirs, pid: number): Promise<void> {
  const file = path.join(dirs.execs, `${pid}.bridge.json`);
  const id = await readIdentity(file);
  if (!id) return;
  for (let i = 0; i < 100 && isAlive(id); i++) {
    if (i === 50) signalQuietly(id.pid, 'SIGKILL');
    await sleep(10);
  }
  await rm(file, { force: true });
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
