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
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { errorMessage } from '../../shared/errors.ts';
import { folderOf, HOST_CGROUP_PATHS, parseMountinfo, parseProcCgroup, readText, v1Cgroup, words, type CgroupPaths, type MountEntry, type ProcCgroup } from '../host-cgroups.ts';

export type CgroupController = 'memory' | 'pids' | 'cpu';
export const CGROUP_CONTROLLERS: readonly CgroupController[] = ['memory', 'pids', 'cpu'];

/** The leaf of the worker's processes on cgroup v2 (see the file comment). */
export const WORKER_LEAF = 'vcfleet-workers';

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
