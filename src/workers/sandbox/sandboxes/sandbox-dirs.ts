/**
 * Host folders of `local` sandboxes. Each sandbox is `<root>/<label>-<random>/` holding
 * `workspace/` (the sandbox workdir), `tmp/` (its `/tmp`), `owner.json` (the worker that made it)
 * and `execs/<pid>.json` (the bwrap processes running in it). A worker that starts removes the
 * folders whose owner is dead, killing any bwrap process still recorded there.
 */
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { identityOf, isAlive, signalQuietly, type ProcessIdentity } from './proc-tree.ts';

/** Default parent of all sandbox folders of this host. */
export function defaultSandboxRoot(): string {
  return path.join(os.tmpdir(), 'vcfleet-sandboxes');
}

export interface SandboxDirs {
  root: string;
  workspace: string;
  tmp: string;
  execs: string;
}

/** A folder without an owner file older than this is a creation that crashed half-way. */
const UNOWNED_GRACE_MS = 10 * 60 * 1000;

function safeLabel(label: string): string {
  return label.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 60) || 'sandbox';
}

/** Creates the folders of a new sandbox, owned by this process. */
export async function createSandboxDirs(rootDir: string, label: string): Promise<SandboxDirs> {
  await mkdir(rootDir, { recursive: true, mode: 0o700 });
  const root = await mkdtemp(path.join(rootDir, `${safeLabel(label)}-`));
  const dirs: SandboxDirs = {
    root,
    workspace: path.join(root, 'workspace'),
    tmp: path.join(root, 'tmp'),
    execs: path.join(root, 'execs'),
  };
  await writeFile(path.join(root, 'owner.json'), JSON.stringify(identityOf(process.pid)));
  await Promise.all([
    mkdir(dirs.workspace),
    mkdir(path.join(dirs.tmp, 'home'), { recursive: true }),
    mkdir(dirs.execs),
  ]);
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

/** Removes the sandbox folders of dead workers of this host; returns how many. */
export async function reapOrphanDirs(rootDir: string): Promise<number> {
  const entries = await readdir(rootDir, { withFileTypes: true }).catch(() => []);
  let reaped = 0;
  for (const entry of entries) {
    if (!entry.isDirectory()) continue;
    const dir = path.join(rootDir, entry.name);
    if (!(await isOrphan(dir))) continue;
    await killRecordedExecs(path.join(dir, 'execs'));
    await rm(dir, { recursive: true, force: true });
    reaped++;
  }
  return reaped;
}

/** Kills what still runs and removes the folders (idempotent). */
export async function removeSandboxDirs(dirs: SandboxDirs): Promise<void> {
  await killRecordedExecs(dirs.execs);
  await rm(dirs.root, { recursive: true, force: true, maxRetries: 3 });
}
