/**
 * Where this host lets the worker make cgroups for its sandboxes, found the way the host offers
 * them: per controller (memory, pids, cpu), cgroup v2 when the worker's v2 cgroup offers it, else a
 * cgroup v1 hierarchy that has it mounted (hybrid hosts mix both: a v2 tree with no controllers of
 * ours beside v1 controllers). Sandbox cgroups are made under the worker's own cgroup, so limits an
 * operator put on the worker still hold.
 *
 * On v2 a cgroup other than the root may not both hold processes and give controllers to children
 * ("no internal processes"). When the worker's cgroup holds processes, they all move into a leaf
 * child (`vcfleet-workers`) first, then `+memory +pids +cpu` is enabled for the children; sandbox
 * cgroups sit beside that leaf. A worker started later inside the leaf uses the leaf's parent.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { errorMessage } from '../../shared/errors.ts';

export type CgroupController = 'memory' | 'pids' | 'cpu';
export const CGROUP_CONTROLLERS: readonly CgroupController[] = ['memory', 'pids', 'cpu'];

/** The leaf of the worker's processes on cgroup v2 (see the file comment). */
export const WORKER_LEAF = 'vcfleet-workers';

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

/** Where one controller's sandbox cgroups are made. */
export interface CgroupPlace {
  version: 1 | 2;
  /** The folder that holds the sandboxes' cgroups (the worker's own cgroup, or its parent on v2). */
  parent: string;
}

export interface CgroupLayout {
  places: Partial<Record<CgroupController, CgroupPlace>>;
  /** Why each controller that has no place cannot be used. */
  missing: Partial<Record<CgroupController, string>>;
}

interface MountEntry {
  /** The cgroup path that this mount shows at its mount point. */
  root: string;
  mountPoint: string;
  fsType: string;
  superOptions: string[];
}

interface ProcCgroup {
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

function parseProcCgroup(text: string): ProcCgroup[] {
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id, ctrls, ...rest] = line.split(':');
      return { hierarchy: Number(id), controllers: ctrls ? ctrls.split(',') : [], path: rest.join(':') };
    });
}

/** The folder of the worker's cgroup `cgPath` in a hierarchy mounted as `mount`, or null when not visible there. */
function folderOf(mount: MountEntry, cgPath: string, paths: CgroupPaths): string | null {
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

function words(text: string): string[] {
  return text.split(/\s+/).filter(Boolean).map((w) => w.replace(/^\+/, ''));
}

/**
 * Makes `base` able to give `wanted` to child cgroups: moves its processes into the worker leaf when
 * it is not the root (which has no `cgroup.type` and is exempt), then enables the controllers.
 */
async function delegateV2(base: string, wanted: CgroupController[]): Promise<void> {
  const enabled = words(await readText(path.join(base, 'cgroup.subtree_control')));
  const toEnable = wanted.filter((c) => !enabled.includes(c));
  if (toEnable.length === 0) return;
  const procs = words(await readText(path.join(base, 'cgroup.procs')));
  if (existsSync(path.join(base, 'cgroup.type')) && procs.length > 0) {
    const leaf = path.join(base, WORKER_LEAF);
    await mkdir(leaf, { recursive: true });
    for (const pid of procs) {
      // A process that exited meanwhile (ESRCH) needs no move.
      await writeFile(path.join(leaf, 'cgroup.procs'), pid).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ESRCH') throw err;
      });
    }
  }
  await writeFile(path.join(base, 'cgroup.subtree_control'), toEnable.map((c) => `+${c}`).join(' '));
}

async function placeV2(mount: MountEntry, proc: ProcCgroup, paths: CgroupPaths, layout: CgroupLayout): Promise<void> {
  const own = folderOf(mount, proc.path, paths);
  if (own === null) return;
  const base = path.basename(own) === WORKER_LEAF ? path.dirname(own) : own;
  const offered = words(await readText(path.join(base, 'cgroup.controllers')));
  const wanted = CGROUP_CONTROLLERS.filter((c) => offered.includes(c));
  for (const c of CGROUP_CONTROLLERS.filter((c) => !offered.includes(c))) {
    // Kept only if no v1 hierarchy has it either (hybrid hosts).
    layout.missing[c] = `cgroup v2 ${base} is not given the ${c} controller (cgroup.controllers: ${offered.join(' ') || 'none'})`;
  }
  if (wanted.length === 0) return;
  try {
    await delegateV2(base, wanted);
    for (const c of wanted) layout.places[c] = { version: 2, parent: base };
  } catch (err) {
    const why = `cgroup v2 ${base} offers ${wanted.join(', ')}, but enabling them for sandboxes failed: ${errorMessage(err)}`;
    for (const c of wanted) layout.missing[c] = why;
  }
}

/** The v1 hierarchy that offers `controller`, and this process's folder in it; null when either is not visible. */
function v1Cgroup(mounts: MountEntry[], procs: ProcCgroup[], controller: CgroupController, paths: CgroupPaths): { mount: MountEntry; folder: string } | null {
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

/**
 * Finds where each controller's sandbox cgroups go. Side effect on cgroup v2 only: the leaf move
 * and enabling controllers (see the file comment). Never throws: what is unusable is in `missing`.
 */
export async function detectCgroupLayout(paths: CgroupPaths = HOST_CGROUP_PATHS): Promise<CgroupLayout> {
  const layout: CgroupLayout = { places: {}, missing: {} };
  const procs = parseProcCgroup(await readText(paths.procSelfCgroup));
  const mounts = parseMountinfo(await readText(paths.mountinfo));
  const v2Proc = procs.find((p) => p.hierarchy === 0);
  const v2Mount = mounts.find((m) => m.fsType === 'cgroup2');
  if (v2Proc && v2Mount) await placeV2(v2Mount, v2Proc, paths, layout);
  const noneMounted = !mounts.some((m) => m.fsType === 'cgroup' || m.fsType === 'cgroup2');
  for (const c of CGROUP_CONTROLLERS) {
    if (layout.places[c]) continue;
    if (noneMounted) {
      layout.missing[c] = `no cgroup file system is mounted in this mount namespace (${paths.mountinfo} lists none): mount cgroup2 on ${paths.sysfsRoot} ` +
        '(a container needs it, e.g. --cgroupns=private), or start the worker without `ip netns exec`, which mounts a /sys without it (use nsenter --net)';
      continue;
    }
    const v1 = v1Cgroup(mounts, procs, c, paths);
    if (v1) {
      layout.places[c] = { version: 1, parent: v1.folder };
      delete layout.missing[c];
    } else {
      layout.missing[c] ??= `no cgroup hierarchy offers the ${c} controller to this process (${paths.procSelfCgroup}, ${paths.mountinfo})`;
    }
  }
  return layout;
}
