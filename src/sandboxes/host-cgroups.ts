/**
 * This host's cgroups as the worker process sees them: where the cgroup file systems are mounted, the
 * worker's own cgroup in each, and its memory cgroup (read only). The `local` provider places its
 * sandboxes' cgroups from here (local/cgroup-layout.ts); the sandbox role reads the worker's memory
 * from here for admission by memory.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';

/** Where the host's cgroup files are; tests point these at a fake tree. */
export interface CgroupPaths {
  /** The folder that mount points under `/sys/fs/cgroup` in mountinfo are read from; default `/sys/fs/cgroup`. */
  sysfsRoot: string;
  /** The worker's cgroups; default `/proc/self/cgroup`. */
  procSelfCgroup: string;
  /** The worker's mounts; default `/proc/self/mountinfo`. */
  mountinfo: string;
}

export const HOST_CGROUP_PATHS: CgroupPaths = {
  sysfsRoot: '/sys/fs/cgroup',
  procSelfCgroup: '/proc/self/cgroup',
  mountinfo: '/proc/self/mountinfo',
};

export interface MountEntry {
  /** The cgroup path that this mount shows at its mount point. */
  root: string;
  mountPoint: string;
  fsType: string;
  superOptions: string[];
}

export interface ProcCgroup {
  hierarchy: number;
  controllers: string[];
  path: string;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
export function decodeMountPath(p: string): string {
  return p.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

export function parseMountinfo(text: string): MountEntry[] {
  const mounts: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const [left, right] = line.split(' - ');
    if (!left || !right) continue;
    const f = left.split(' ');
    const [fsType, , superOpts] = right.split(' ');
    mounts.push({ root: decodeMountPath(f[3]), mountPoint: decodeMountPath(f[4]), fsType, superOptions: (superOpts ?? '').split(',') });
  }
  return mounts;
}

export function parseProcCgroup(text: string): ProcCgroup[] {
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id, ctrls, ...rest] = line.split(':');
      return { hierarchy: Number(id), controllers: ctrls ? ctrls.split(',') : [], path: rest.join(':') };
    });
}

/** The folder of the worker's cgroup `cgPath` in a hierarchy mounted as `mount`, or null when not visible there. */
export function folderOf(mount: MountEntry, cgPath: string, paths: CgroupPaths): string | null {
  const root = mount.root === '/' ? '' : mount.root;
  if (root && cgPath !== root && !cgPath.startsWith(`${root}/`)) return null;
  const rel = cgPath.slice(root.length);
  const sys = HOST_CGROUP_PATHS.sysfsRoot;
  const mountPoint = mount.mountPoint === sys || mount.mountPoint.startsWith(`${sys}/`)
    ? paths.sysfsRoot + mount.mountPoint.slice(sys.length)
    : mount.mountPoint;
  return path.resolve(mountPoint, `.${rel}`);
}

/** A file's text, or '' when it cannot be read (absent, no permission). */
export async function readText(file: string): Promise<string> {
  return readFile(file, 'utf8').catch(() => '');
}

export function words(text: string): string[] {
  return text.split(/\s+/).filter(Boolean).map((w) => w.replace(/^\+/, ''));
}

/** The v1 hierarchy that offers `controller`, and this process's folder in it; null when either is not visible. */
export function v1Cgroup(mounts: MountEntry[], procs: ProcCgroup[], controller: string, paths: CgroupPaths): { mount: MountEntry; folder: string } | null {
  const mount = mounts.find((m) => m.fsType === 'cgroup' && m.superOptions.includes(controller));
  const proc = procs.find((p) => p.hierarchy !== 0 && p.controllers.includes(controller));
  const folder = mount && proc ? folderOf(mount, proc.path, paths) : null;
  return mount && folder ? { mount, folder } : null;
}

/** The worker's own memory cgroup (v2 when the worker's v2 cgroup has the controller, else v1), read only; null when none is visible. */
export async function ownMemoryCgroup(paths: CgroupPaths = HOST_CGROUP_PATHS): Promise<{ version: 1 | 2; folder: string; mountRoot: string } | null> {
  const procs = parseProcCgroup(await readText(paths.procSelfCgroup));
  const mounts = parseMountinfo(await readText(paths.mountinfo));
  const v2Proc = procs.find((p) => p.hierarchy === 0);
  const v2Mount = mounts.find((m) => m.fsType === 'cgroup2');
  if (v2Proc && v2Mount) {
    const folder = folderOf(v2Mount, v2Proc.path, paths);
    const mountRoot = folderOf(v2Mount, v2Mount.root, paths);
    if (folder && mountRoot && words(await readText(path.join(path.dirname(folder), 'cgroup.controllers'))).concat(words(await readText(path.join(folder, 'cgroup.controllers')))).includes('memory')) {
      return { version: 2, folder, mountRoot };
    }
  }
  const v1 = v1Cgroup(mounts, procs, 'memory', paths);
  const mountRoot = v1 ? folderOf(v1.mount, v1.mount.root, paths) : null;
  return v1 && mountRoot ? { version: 1, folder: v1.folder, mountRoot } : null;
}
