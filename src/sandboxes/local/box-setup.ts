/**
 * What a `local` provider can hold its sandboxes to on this host, found once by trying it: a trial
 * cgroup per controller (made, limited, joined by a shell, removed), a trial tmpfs mount under the
 * sandbox root, and the seccomp filter built and loaded by bwrap. The result says, per limit, how
 * it is enforced or why it is not (BoxReport), and holds what sandboxes then use.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { errorMessage } from '../../shared/errors.ts';
import { SANDBOX_PYTHON, namespaceArgs } from './bwrap-policy.ts';
import { runCheck } from './bwrap-process.ts';
import { CGROUP_CONTROLLERS, detectCgroupLayout, type CgroupController, type CgroupLayout } from './cgroup-layout.ts';
import type { CgroupPaths } from '../host-cgroups.ts';
import { SandboxCgroup, cgroupName, joinCommand, limitFiles } from './sandbox-cgroup.ts';
import { mountDisk, unmountDisk } from './sandbox-disk.ts';
import { buildSeccompFilter } from '../box/seccomp-filter.ts';
import type { BoxItem, BoxReport, SandboxResources } from '../types.ts';

export interface BoxSetupOptions {
  resources: SandboxResources;
  /** Parent folder of the sandbox folders (where the tmpfs mounts go). */
  rootDir: string;
  bwrapPath: string;
  cgroupPaths: CgroupPaths;
  /** The Python with libseccomp's bindings. */
  seccompPython: string;
  /** The host uid a root worker's sandboxes run as (through sandbox-launch.py); null: as this process. */
  hostUid: number | null;
  /** Host paths every sandbox binds read-only (they must be readable by `hostUid`). */
  extraRoBinds: readonly string[];
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

const LAUNCH_SCRIPT = new URL('./sandbox-launch.py', import.meta.url).pathname;
/** Fails naming the first path of "$@" this uid cannot pass through (a folder) or read (a file). */
const READABLE = 'for p in "$@"; do if [ -d "$p" ]; then test -x "$p" || { echo "cannot pass through $p" >&2; exit 1; }; else test -r "$p" || { echo "cannot read $p" >&2; exit 1; }; fi; done';

/**
 * Who sandboxed code is on the host: this worker's own uid when it is not root; for a root worker,
 * `hostUid`, tried once through the launcher with the paths every sandbox binds (readable by it).
 */
async function trialUser(opts: BoxSetupOptions): Promise<BoxItem> {
  const own = process.geteuid?.() ?? -1;
  if (opts.hostUid === null) {
    return own === 0
      ? { enforced: false, detail: 'sandboxed code would run as host root: the provider was made without a host uid' }
      : { enforced: true, detail: `sandboxed code runs as this worker's own uid ${own}` };
  }
  // Everything a sandbox binds from the host: its own folders under the root, and the read-only binds.
  await mkdir(opts.rootDir, { recursive: true, mode: 0o711 });
  await chmod(opts.rootDir, 0o711);
  const paths = [opts.rootDir, ...opts.extraRoBinds];
  const binds = paths.flatMap((p) => ['--ro-bind', p, p]);
  const launch = [LAUNCH_SCRIPT, '--uid', String(opts.hostUid), '--marker', 'launch:', '--', opts.bwrapPath];
  try {
    await runCheck(SANDBOX_PYTHON, ['-I', '-S', ...launch, ...namespaceArgs(), '--ro-bind', '/', '/', ...binds, '--', '/bin/sh', '-c', READABLE, 'sh', ...paths]);
    return { enforced: true, detail: `sandboxed code runs as host uid and gid ${opts.hostUid} (sandbox_config.host_uid), never root; /proc/sys and the kernel's other settings are read-only` };
  } catch (err) {
    return {
      enforced: false,
      detail: `cannot run sandboxes as host uid ${opts.hostUid} (sandbox_config.host_uid): ${errorMessage(err)}; ` +
        `the worker needs CAP_SETUID, CAP_SETGID and CAP_SYS_ADMIN, and that uid must be able to pass through every folder above the sandbox root (${opts.rootDir}) ` +
        "and read what sandboxes bind (the OpenCode binary's folder and its parents): chmod o+x the folders, or move them",
    };
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
  const user = await trialUser(opts);
  const report: BoxReport = {
    memory: cgroupItem('memory', cgroups, r),
    pids: cgroupItem('pids', cgroups, r),
    cpu: cgroupItem('cpu', cgroups, r),
    disk: tmpfsWhy === null
      ? { enforced: true, detail: `a ${r.disk_mib} MiB tmpfs per sandbox under ${opts.rootDir} (workspace, /tmp, /dev/shm); RLIMIT_FSIZE ${r.disk_mib} MiB` }
      : { enforced: false, detail: `cannot mount a tmpfs under ${opts.rootDir} (${tmpfsWhy}): needs root or CAP_SYS_ADMIN; only RLIMIT_FSIZE (${r.disk_mib} MiB per file) applies` },
    seccomp: seccomp.item,
    user,
  };
  return { report, cgroups, tmpfs: tmpfsWhy === null, seccomp: seccomp.bpf };
}
