/**
 * What a `local` provider can hold its sandboxes to on this host, found once by trying it: a trial
 * cgroup per controller (made, limited, joined by a shell, removed), a trial tmpfs mount under the
 * sandbox root, and the seccomp filter built and loaded by bwrap. The result says, per limit, how
 * it is enforced or why it is not (BoxReport), and holds what sandboxes then use.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { errorMessage } from '../../../shared/errors.ts';
import { namespaceArgs } from './bwrap-policy.ts';
import { runCheck } from './bwrap-process.ts';
import { CGROUP_CONTROLLERS, detectCgroupLayout, type CgroupController, type CgroupLayout, type CgroupPaths } from './cgroup-layout.ts';
import { SandboxCgroup, cgroupName, joinCommand, limitFiles } from './sandbox-cgroup.ts';
import { mountDisk, unmountDisk } from './sandbox-disk.ts';
import { buildSeccompFilter } from './seccomp-filter.ts';
import type { BoxItem, BoxReport, SandboxResources } from './types.ts';

export interface BoxSetupOptions {
  resources: SandboxResources;
  /** Parent folder of the sandbox folders (where the tmpfs mounts go). */
  rootDir: string;
  bwrapPath: string;
  cgroupPaths: CgroupPaths;
  /** The Python with libseccomp's bindings. */
  seccompPython: string;
}

export interface BoxSetup {
  report: BoxReport;
  /** Where sandbox cgroups go: only the controllers that passed their trial. */
  cgroups: CgroupLayout;
  /** Whether each sandbox gets its own tmpfs disk. */
  tmpfs: boolean;
  /** The BPF program for `bwrap --seccomp`, or null when it could not be built or loaded. */
  seccomp: Buffer | null;
}

/** Makes, limits, joins and removes a trial cgroup for one controller; throws why it cannot. */
async function trialCgroup(c: CgroupController, layout: CgroupLayout, r: SandboxResources): Promise<void> {
  const one: CgroupLayout = { places: { [c]: layout.places[c] }, missing: {} };
  // Unique per trial: two providers of one process may probe at the same time.
  const cg = await SandboxCgroup.create(one, cgroupName(`probe-${c}-${randomBytes(4).toString('hex')}`), r);
  try {
    const join = joinCommand(cg.procsFiles(), 'vcfleet-box-probe', '/bin/true', []);
    await runCheck(join.command, join.args);
  } finally {
    await cg.remove();
  }
}

function cgroupItem(c: CgroupController, layout: CgroupLayout, r: SandboxResources): BoxItem {
  const place = layout.places[c];
  if (!place) return { enforced: false, detail: layout.missing[c] ?? 'no cgroup' };
  // An optional file (swap accounting) is named only where this kernel has it.
  const files = limitFiles(c, place.version, r)
    .filter(([f, , optional]) => !optional || existsSync(path.join(place.parent, f)))
    .map(([f, v]) => `${f}=${v}`)
    .join(', ');
  return { enforced: true, detail: `cgroup v${place.version} ${place.parent}/vcfleet-*: ${files}` };
}

async function trialTmpfs(rootDir: string): Promise<string | null> {
  const dir = path.join(rootDir, `.probe-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await mountDisk(dir, 1);
    await unmountDisk(dir);
    return null;
  } catch (err) {
    return errorMessage(err);
  } finally {
    await rmdir(dir).catch(() => {});
  }
}

async function trialSeccomp(opts: BoxSetupOptions): Promise<{ bpf: Buffer | null; item: BoxItem }> {
  try {
    const bpf = await buildSeccompFilter(opts.seccompPython);
    await runCheck(opts.bwrapPath, [...namespaceArgs(), '--ro-bind', '/', '/', '--seccomp', '3', '--', 'true'], [bpf]);
    return { bpf, item: { enforced: true, detail: `bwrap --seccomp: libseccomp filter of seccomp-filter.py (${bpf.length / 8} BPF instructions)` } };
  } catch (err) {
    return { bpf: null, item: { enforced: false, detail: errorMessage(err) } };
  }
}

/** Tries every part of the box on this host. Never throws: what fails is reported as not enforced. */
export async function setUpBox(opts: BoxSetupOptions): Promise<BoxSetup> {
  const r = opts.resources;
  const cgroups = await detectCgroupLayout(opts.cgroupPaths);
  for (const c of CGROUP_CONTROLLERS) {
    if (!cgroups.places[c]) continue;
    try {
      await trialCgroup(c, cgroups, r);
    } catch (err) {
      cgroups.missing[c] = errorMessage(err);
      delete cgroups.places[c];
    }
  }
  const tmpfsWhy = await trialTmpfs(opts.rootDir);
  const seccomp = await trialSeccomp(opts);
  const report: BoxReport = {
    memory: cgroupItem('memory', cgroups, r),
    pids: cgroupItem('pids', cgroups, r),
    cpu: cgroupItem('cpu', cgroups, r),
    disk: tmpfsWhy === null
      ? { enforced: true, detail: `a ${r.disk_mib} MiB tmpfs per sandbox under ${opts.rootDir} (workspace, /tmp, /dev/shm); RLIMIT_FSIZE ${r.disk_mib} MiB` }
      : { enforced: false, detail: `cannot mount a tmpfs under ${opts.rootDir} (${tmpfsWhy}): needs root or CAP_SYS_ADMIN; only RLIMIT_FSIZE (${r.disk_mib} MiB per file) applies` },
    seccomp: seccomp.item,
  };
  return { report, cgroups, tmpfs: tmpfsWhy === null, seccomp: seccomp.bpf };
}
