/**
 * Where sandbox cgroups go, found from fake cgroup trees (a folder standing for /sys/fs/cgroup plus
 * fake /proc/self/cgroup and /proc/self/mountinfo files): cgroup v2 as root, v2 delegated (the
 * worker's processes move into a leaf, controllers are enabled for the children, and a worker
 * restarted inside the leaf does not nest another), v1, a hybrid host like the CI machine (an empty
 * v2 tree beside v1 controllers), a v1 mount showing a sub-tree, and a host with no cgroups.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WORKER_LEAF, detectCgroupLayout } from '../../../src/sandboxes/local/cgroup-layout.ts';
import { fakeHost, OTHER_MOUNTS, V2_ROOT_MOUNT, v1Mount } from '../../helpers/fake-cgroup.ts';
import { removeTmpDirs } from '../../helpers/tmp.ts';

afterEach(removeTmpDirs);

describe('detectCgroupLayout on fake cgroup trees', () => {
  it('v2 root: enables the controllers for children in the root and makes no leaf', async () => {
    const host = fakeHost('0::/\n', [...OTHER_MOUNTS, V2_ROOT_MOUNT], {
      'cgroup.controllers': 'cpuset cpu io memory hugetlb pids rdma misc\n',
      'cgroup.subtree_control': '',
      'cgroup.procs': '1\n2\n77\n',
    });
    const layout = await detectCgroupLayout(host);
    for (const c of ['memory', 'pids', 'cpu'] as const) expect(layout.places[c]).toEqual({ version: 2, parent: host.sys });
    expect(layout.missing).toEqual({});
    expect(readFileSync(path.join(host.sys, 'cgroup.subtree_control'), 'utf8')).toBe('+memory +pids +cpu');
    expect(existsSync(path.join(host.sys, WORKER_LEAF))).toBe(false);
  });

  it('v2 delegated (a systemd scope): moves its processes into a leaf, then enables the controllers; a restarted worker in the leaf reuses the parent', async () => {
    const scope = 'user.slice/user-1000.slice/user@1000.service/app.slice/run-u7.scope';
    const host = fakeHost(`0::/${scope}\n`, [...OTHER_MOUNTS, V2_ROOT_MOUNT], {
      [`${scope}/cgroup.controllers`]: 'cpu memory pids\n',
      [`${scope}/cgroup.type`]: 'domain\n',
      [`${scope}/cgroup.subtree_control`]: '',
      [`${scope}/cgroup.procs`]: '4242\n',
    });
    const base = path.join(host.sys, scope);
    const layout = await detectCgroupLayout(host);
    expect(layout.places).toEqual({ memory: { version: 2, parent: base }, pids: { version: 2, parent: base }, cpu: { version: 2, parent: base } });
    expect(readFileSync(path.join(base, WORKER_LEAF, 'cgroup.procs'), 'utf8')).toBe('4242');
    expect(readFileSync(path.join(base, 'cgroup.subtree_control'), 'utf8')).toBe('+memory +pids +cpu');

    // The next worker of that scope starts inside the leaf, where the kernel now shows the controllers enabled.
    writeFileSync(host.procSelfCgroup, `0::/${scope}/${WORKER_LEAF}\n`);
    writeFileSync(path.join(base, 'cgroup.subtree_control'), 'cpu memory pids\n');
    const again = await detectCgroupLayout(host);
    expect(again.places.memory).toEqual({ version: 2, parent: base });
    expect(existsSync(path.join(base, WORKER_LEAF, WORKER_LEAF))).toBe(false);
  });

  it('v2 delegated without cpu: memory and pids are placed, cpu is missing with the reason', async () => {
    const host = fakeHost('0::/svc\n', [V2_ROOT_MOUNT], {
      'svc/cgroup.controllers': 'memory pids\n', 'svc/cgroup.type': 'domain\n', 'svc/cgroup.subtree_control': '', 'svc/cgroup.procs': '',
    });
    const layout = await detectCgroupLayout(host);
    expect(Object.keys(layout.places).sort()).toEqual(['memory', 'pids']);
    expect(layout.missing.cpu).toMatch(/not given the cpu controller \(cgroup.controllers: memory pids\)/);
    // No processes in the cgroup: nothing to move.
    expect(existsSync(path.join(host.sys, 'svc', WORKER_LEAF))).toBe(false);
  });

  it('v1: each controller under the worker\'s own cgroup of its hierarchy', async () => {
    const host = fakeHost('5:pids:/\n4:memory:/batch/w1\n2:cpu,cpuacct:/batch\n1:name=systemd:/\n', [...OTHER_MOUNTS, v1Mount('pids'), v1Mount('memory'), v1Mount('cpu,cpuacct')], {
      'memory/batch/w1/cgroup.procs': '', 'pids/cgroup.procs': '', 'cpu,cpuacct/batch/cgroup.procs': '',
    });
    const layout = await detectCgroupLayout(host);
    expect(layout.places).toEqual({
      memory: { version: 1, parent: path.join(host.sys, 'memory/batch/w1') },
      pids: { version: 1, parent: path.join(host.sys, 'pids') },
      cpu: { version: 1, parent: path.join(host.sys, 'cpu,cpuacct/batch') },
    });
    expect(layout.missing).toEqual({});
  });

  it('hybrid like the CI machine: the v2 tree offers none of ours (hugetlb only) and is left untouched; v1 is used', async () => {
    const unified = '/ /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw';
    const host = fakeHost(
      '9:name=systemd:/\n8:pids:/\n4:memory:/process_api/2de48494\n1:cpu:/\n0::/\n',
      [...OTHER_MOUNTS, '/ /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755', v1Mount('cpu'), v1Mount('memory'), v1Mount('pids'), unified],
      { 'unified/cgroup.controllers': 'hugetlb\n', 'unified/cgroup.subtree_control': '', 'unified/cgroup.procs': '1\n' },
    );
    const layout = await detectCgroupLayout(host);
    expect(layout.places).toEqual({
      memory: { version: 1, parent: path.join(host.sys, 'memory/process_api/2de48494') },
      pids: { version: 1, parent: path.join(host.sys, 'pids') },
      cpu: { version: 1, parent: path.join(host.sys, 'cpu') },
    });
    expect(layout.missing).toEqual({});
    expect(readFileSync(path.join(host.sys, 'unified/cgroup.subtree_control'), 'utf8')).toBe('');
    expect(existsSync(path.join(host.sys, 'unified', WORKER_LEAF))).toBe(false);
  });

  it('a v1 mount that shows a sub-tree (a container without a cgroup namespace) maps the worker\'s path into it', async () => {
    const host = fakeHost('4:memory:/docker/abc/inner\n8:pids:/elsewhere\n', [v1Mount('memory', '/docker/abc'), v1Mount('pids', '/docker/abc')], {});
    const layout = await detectCgroupLayout(host);
    expect(layout.places.memory).toEqual({ version: 1, parent: path.join(host.sys, 'memory/inner') });
    // The worker's pids cgroup is outside what the mount shows: not usable.
    expect(layout.places.pids).toBeUndefined();
    expect(layout.missing.pids).toMatch(/no cgroup hierarchy offers the pids controller/);
  });

  it('no cgroups at all: every controller is missing, with the files it looked at', async () => {
    const host = fakeHost('0::/\n', OTHER_MOUNTS, {});
    const layout = await detectCgroupLayout(host);
    expect(layout.places).toEqual({});
    for (const c of ['memory', 'pids', 'cpu'] as const) {
      expect(layout.missing[c]).toContain(host.mountinfo);
      expect(layout.missing[c]).toMatch(/no cgroup file system is mounted in this mount namespace.*mount cgroup2 on .*ip netns exec/);
    }
  });
});
