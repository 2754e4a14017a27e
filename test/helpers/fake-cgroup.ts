/**
 * A fake host for cgroup code: a folder standing for /sys/fs/cgroup plus fake /proc/self/cgroup and
 * /proc/self/mountinfo files, and the mount lines of cgroup v2 and v1 hierarchies.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { CgroupPaths } from '../../src/sandboxes/host-cgroups.ts';
import { createTmpDir } from './tmp.ts';

/** A fake host: `files` are relative to the fake /sys/fs/cgroup; `dir` holds the fake /proc files. */
export function fakeHost(procSelfCgroup: string, mounts: string[], files: Record<string, string>): CgroupPaths & { sys: string; dir: string } {
  const dir = createTmpDir('vcfleet-fake-cgroup-');
  const sys = path.join(dir, 'sys-fs-cgroup');
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(sys, rel)), { recursive: true });
    writeFileSync(path.join(sys, rel), content);
  }
  mkdirSync(sys, { recursive: true });
  writeFileSync(path.join(dir, 'cgroup'), procSelfCgroup);
  writeFileSync(path.join(dir, 'mountinfo'), mounts.map((m, i) => `${30 + i} 23 0:${26 + i} ${m}`).join('\n') + '\n');
  return { sys, dir, sysfsRoot: sys, procSelfCgroup: path.join(dir, 'cgroup'), mountinfo: path.join(dir, 'mountinfo') };
}

export const V2_ROOT_MOUNT = '/ /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot';
export const v1Mount = (ctrl: string, root = '/') => `${root} /sys/fs/cgroup/${ctrl} rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,${ctrl}`;
export const OTHER_MOUNTS = ['/ / rw,relatime shared:1 - ext4 /dev/vda rw', '/ /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw'];
