/**
 * One cgroup per `local` sandbox (one folder per controller on v1, one folder on v2), holding every
 * process of every exec of that sandbox: memory with no swap, pids and CPU limits, the OOM kill and
 * pids-limit counters, and a kill of whatever is left. Its name, `vcfleet-<pid>-<starttime>-<id>`,
 * names the worker that made it, so a later worker removes the cgroups of a dead one.
 */
import { mkdir, readFile, readdir, rmdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { InfraError, errorMessage } from '../../shared/errors.ts';
import type { CgroupController, CgroupLayout, CgroupPlace } from './cgroup-layout.ts';
import { bootId, isAlive, processStartTime, signalQuietly } from '../proc-tree.ts';
import type { SandboxResources } from '../types.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const CPU_PERIOD_US = 100_000;
const NAME = /^vcfleet-(\d+)-(\d+)-(.+)$/;

/** The cgroup name of sandbox `id` of this worker process. */
export function cgroupName(id: string, pid = process.pid): string {
  return `vcfleet-${pid}-${processStartTime(pid) ?? 0}-${id}`;
}

/** The limit files of one controller, in the order they must be written, with their values. */
export function limitFiles(controller: CgroupController, version: 1 | 2, r: SandboxResources): Array<[string, string, 'optional'?]> {
  const bytes = String(r.memory_mib * 1024 * 1024);
  const quota = String(Math.max(1000, Math.round(r.cpu * CPU_PERIOD_US)));
  if (controller === 'pids') return [['pids.max', String(r.pids)]];
  if (controller === 'cpu') {
    return version === 2 ? [['cpu.max', `${quota} ${CPU_PERIOD_US}`]] : [['cpu.cfs_period_us', String(CPU_PERIOD_US)], ['cpu.cfs_quota_us', quota]];
  }
  // v1: memsw (memory + swap) must stay >= the memory limit, so it is written second; it exists only with swap accounting.
  return version === 2
    ? [['memory.max', bytes], ['memory.swap.max', '0', 'optional']]
    : [['memory.limit_in_bytes', bytes], ['memory.memsw.limit_in_bytes', bytes, 'optional']];
}

async function readCounter(file: string, key: string): Promise<number | null> {
  const text = await readFile(file, 'utf8').catch(() => null);
  if (text === null) return null;
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : null;
}

async function pidsIn(dir: string): Promise<number[]> {
  const text = await readFile(path.join(dir, 'cgroup.procs'), 'utf8').catch(() => '');
  return text.split('\n').filter(Boolean).map(Number);
}

/** SIGKILLs every process of the cgroup folder `dir` (cgroup.kill on v2, else each member until none is left). */
export async function killCgroup(dir: string): Promise<void> {
  if (await writeFile(path.join(dir, 'cgroup.kill'), '1', { flag: 'r+' }).then(() => true, () => false)) return;
  // A fork between reading the list and the kill is caught by the next round.
  for (let round = 0; round < 50; round++) {
    const pids = await pidsIn(dir);
    if (pids.length === 0) return;
    for (const pid of pids) signalQuietly(pid, 'SIGKILL');
    await sleep(20);
  }
}

/** rmdir, retried while the killed processes finish exiting (EBUSY); ENOENT counts as removed. */
async function removeFolder(dir: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await rmdir(dir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return;
      if (code !== 'EBUSY' || attempt >= 40) throw err;
      await killCgroup(dir);
      await sleep(50);
    }
  }
}

export class SandboxCgroup {
  private constructor(private readonly folders: Map<CgroupController, { dir: string; version: 1 | 2 }>) {}

  /** Makes the cgroup `name` in every place of `layout` and writes its limits; throws InfraError. */
  static async create(layout: CgroupLayout, name: string, r: SandboxResources): Promise<SandboxCgroup> {
    const folders = new Map<CgroupController, { dir: string; version: 1 | 2 }>();
    for (const [c, place] of Object.entries(layout.places) as Array<[CgroupController, CgroupPlace]>) {
      folders.set(c, { dir: path.join(place.parent, name), version: place.version });
    }
    const cg = new SandboxCgroup(folders);
    try {
      for (const dir of cg.dirs()) await mkdir(dir);
      for (const [c, { dir, version }] of folders) {
        for (const [file, value, optional] of limitFiles(c, version, r)) {
          // r+: a control file is never created, only written (a missing one is ENOENT).
          await writeFile(path.join(dir, file), value, { flag: 'r+' }).catch((err: NodeJS.ErrnoException) => {
            if (!(optional && err.code === 'ENOENT')) throw err;
          });
        }
      }
    } catch (err) {
      await cg.remove().catch(() => {});
      throw new InfraError(`cannot set up the sandbox cgroup ${name}: ${errorMessage(err)}`, { cause: err });
    }
    return cg;
  }

  /** The distinct cgroup folders (v2: one; v1: one per controller). */
  dirs(): string[] {
    return [...new Set([...this.folders.values()].map((f) => f.dir))];
  }

  /** The `cgroup.procs` files a process writes its pid to, to join the sandbox before it forks. */
  procsFiles(): string[] {
    return this.dirs().map((d) => path.join(d, 'cgroup.procs'));
  }

  /** OOM kills so far (v2 memory.events; v1 memory.oom_control, else memory.failcnt); null without memory. */
  async oomKills(): Promise<number | null> {
    const mem = this.folders.get('memory');
    if (!mem) return null;
    if (mem.version === 2) return readCounter(path.join(mem.dir, 'memory.events'), 'oom_kill');
    const kills = await readCounter(path.join(mem.dir, 'memory.oom_control'), 'oom_kill');
    if (kills !== null) return kills;
    const failcnt = await readFile(path.join(mem.dir, 'memory.failcnt'), 'utf8').catch(() => null);
    return failcnt === null ? null : Number(failcnt.trim());
  }

  /** Times a fork or clone failed at `pids.max`; null without the pids controller. */
  async pidsMaxHits(): Promise<number | null> {
    const pids = this.folders.get('pids');
    return pids ? readCounter(path.join(pids.dir, 'pids.events'), 'max') : null;
  }

  /** Kills every process left in the sandbox. */
  async kill(): Promise<void> {
    await Promise.all(this.dirs().map((d) => killCgroup(d)));
  }

  /** Kills what is left and removes the folders (idempotent). */
  async remove(): Promise<void> {
    await this.kill();
    for (const dir of this.dirs()) await removeFolder(dir);
  }
}

/** Whether the cgroup folder name belongs to a dead worker of this host. */
function isOrphanName(name: string): boolean {
  const m = NAME.exec(name);
  if (!m) return false;
  return !isAlive({ pid: Number(m[1]), startTime: Number(m[2]), bootId: bootId(), hostname: os.hostname() });
}

/**
 * Kills and removes the sandbox cgroups that dead workers left in the places of `layout`; returns
 * the ids of their sandboxes. What cannot be removed is reported to `onError`, never thrown.
 */
export async function reapOrphanCgroups(layout: CgroupLayout, onError: (dir: string, err: unknown) => void): Promise<string[]> {
  const parents = new Set(Object.values(layout.places).map((p) => p.parent));
  const reaped = new Set<string>();
  for (const parent of parents) {
    const names = await readdir(parent).catch(() => [] as string[]);
    for (const name of names.filter(isOrphanName)) {
      const dir = path.join(parent, name);
      try {
        await killCgroup(dir);
        await removeFolder(dir);
        reaped.add(NAME.exec(name)![3]);
      } catch (err) {
        onError(dir, err);
      }
    }
  }
  return [...reaped];
}

/**
 * Joins the sandbox before running anything: a shell writes its own pid into every `cgroup.procs`
 * and only then execs `command` (bwrap), so nothing it starts can fork outside the cgroup. Paths and
 * argv are positional arguments, never put into the script. If a write fails, the shell prints
 * `<marker> cannot join <file>` and exits 125 without running the command.
 */
const JOIN_SCRIPT =
  'm=$1; shift; while [ "$1" != -- ]; do { echo $$ > "$1"; } 2>/dev/null || { echo "$m cannot join $1" >&2; exit 125; }; shift; done; shift; exec "$@"';

export function joinCommand(procsFiles: readonly string[], marker: string, command: string, args: readonly string[]): { command: string; args: string[] } {
  return { command: '/bin/sh', args: ['-c', JOIN_SCRIPT, 'sh', marker, ...procsFiles, '--', command, ...args] };
}
