/**
 * The `local` provider: one bubblewrap sandbox per task on the worker's own host.
 *
 * A sandbox is a set of host folders plus a policy (bwrap-policy.ts); every `exec` is its own bwrap
 * process with its own PID namespace, so killing that bwrap kills everything the command started,
 * including `setsid` daemons (OpenCode's bash tools). The policy model is reachable only through
 * the task's gateway: its Unix socket is bound into the sandbox and sandbox-entry.py serves it on
 * `http://127.0.0.1:<gateway.port>` inside the sandbox's own network namespace.
 *
 * Everything run in a sandbox is treated as hostile, so each sandbox is held to `resources` (the
 * box): one cgroup for all its processes (memory without swap, pids, CPU), one size-capped tmpfs for
 * its workspace, /tmp and /dev/shm, rlimits on file size and open files, and a seccomp filter. What
 * the host cannot enforce is reported by `probe()` (box-setup.ts).
 *
 * A root worker never runs sandboxed code as root: every command goes through the launcher
 * (sandbox-launch.py), which maps the sandbox to host uid `hostUid` (`sandbox_config.host_uid`) and
 * serves the gateway from outside the sandbox, telling the agent's own connections from the others
 * (`verifiesCallOrigin`). A rootless worker's sandboxes run as the worker's own uid, and the entry
 * script bridges the gateway socket inside the sandbox (origin not verified).
 */
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, InfraError, errorMessage } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import { SANDBOX_PYTHON } from './bwrap-policy.ts';
import { bwrapMissing, defaultBwrapPath, probeBwrap } from './bwrap-process.ts';
import { uniformReport } from '../box-report.ts';
import { setUpBox, type BoxSetup } from './box-setup.ts';
import { HOST_CGROUP_PATHS, type CgroupPaths } from '../host-cgroups.ts';
import { opencodeBinaryPath } from './opencode-binary.ts';
import { reapOrphanGatewayDirs } from '../../gateway/index.ts';
import { ENTRY_SCRIPT, LocalBwrapSandbox, type SandboxOptions } from './sandbox.ts';
import { DEFAULT_MAX_CAPTURE_BYTES } from '../output-capture.ts';
import { SandboxBox } from './sandbox-box.ts';
import { reapOrphanCgroups } from './sandbox-cgroup.ts';
import { createSandboxDirs, defaultSandboxRoot, reapOrphanDirs, removeSandboxDirs } from './sandbox-dirs.ts';
import { mountDisk } from './sandbox-disk.ts';
import { SECCOMP_PYTHON } from '../box/seccomp-filter.ts';
import type { BoxReport, Sandbox, SandboxCapabilities, SandboxProvider, SandboxResources, SandboxSpec } from '../types.ts';

export { SANDBOX_PATH } from './bwrap-process.ts';

/** `sandbox_config.resources` defaults. */
export const DEFAULT_RESOURCES: SandboxResources = { cpu: 2, memory_mib: 8192, pids: 1024, disk_mib: 8192 };
/** `sandbox_config.host_uid` default: the host uid (and gid) a root worker's sandboxes run as. */
export const DEFAULT_HOST_UID = 100_000;

export interface LocalBwrapOptions {
  /** Parent folder of the sandbox folders; default `os.tmpdir()/vcfleet-sandboxes`. */
  rootDir?: string;
  /** The work folder inside the sandbox (`sandbox_workdir`), e.g. `/workspace`. */
  workdir: string;
  /** Host paths visible read-only at the same path inside (e.g. the OpenCode binary's folder). */
  extraRoBinds?: string[];
  /** The bubblewrap binary; default `VCFLEET_BWRAP`, else `/usr/bin/bwrap`, else `bwrap` on the PATH. */
  bwrapPath?: string;
  /** Between SIGTERM to the sandbox's processes and SIGKILL, in milliseconds; default 2000. */
  killGraceMs?: number;
  /** Bytes of `stdout` and of `stderr` kept in an ExecResult (the tail); default 16 MiB each. */
  maxCaptureBytes?: number;
  /** Limits of every sandbox (`sandbox_config.resources`); default DEFAULT_RESOURCES. */
  resources?: SandboxResources;
  /** Hold sandboxes to `resources` (cgroup, tmpfs disk, rlimits, seccomp); default true. false only compares costs. */
  box?: boolean;
  /** Where the host's cgroup files are; default the real ones (tests use fake trees). */
  cgroupPaths?: CgroupPaths;
  /** The Python with libseccomp's bindings; default `/usr/bin/python3`. */
  seccompPython?: string;
  /** How often a running sandbox's disk is checked for being full, in milliseconds; default 2000. */
  diskPollMs?: number;
  /** The host uid a root worker's sandboxes run as (`sandbox_config.host_uid`); default DEFAULT_HOST_UID. */
  hostUid?: number;
  /** Where this host's gateways put their sockets (the runner's `socketDir`); default the OS temp folder. */
  gatewaySocketDir?: string;
  /** Whether this process is root (default: its effective uid is 0); tests set it. */
  asRoot?: boolean;
  logger?: Logger;
}

export class LocalBwrapProvider implements SandboxProvider {
  readonly name = 'local' as const;
  readonly capabilities: SandboxCapabilities;
  private readonly live = new Set<LocalBwrapSandbox>();
  private usable: Promise<void> | null = null;
  private setup: Promise<BoxSetup> | null = null;
  private readonly rootDir: string;
  private readonly resources: SandboxResources;
  private readonly sandboxOpts: SandboxOptions;

  constructor(private readonly opts: LocalBwrapOptions) {
    this.rootDir = opts.rootDir ?? defaultSandboxRoot();
    this.resources = opts.resources ?? DEFAULT_RESOURCES;
    const asRoot = opts.asRoot ?? process.geteuid?.() === 0;
    this.sandboxOpts = {
      workdir: opts.workdir,
      extraRoBinds: opts.extraRoBinds ?? [],
      bwrapPath: opts.bwrapPath ?? defaultBwrapPath(),
      killGraceMs: opts.killGraceMs ?? 2000,
      maxCaptureBytes: opts.maxCaptureBytes ?? DEFAULT_MAX_CAPTURE_BYTES,
      hostUid: asRoot ? (opts.hostUid ?? DEFAULT_HOST_UID) : null,
    };
    this.capabilities = { gateway: 'unix', verifiesCallOrigin: asRoot, usesHostMemory: true, agentBinary: (config) => opencodeBinaryPath(config), maxLifetimeS: null, image: null };
  }

  async create(spec: SandboxSpec, signal?: AbortSignal): Promise<Sandbox> {
    signal?.throwIfAborted();
    await this.ensureUsable();
    const setup = this.opts.box === false ? null : await this.boxSetup();
    if ((setup || spec.gateway.socketPath) && !existsSync(SANDBOX_PYTHON)) {
      throw new InfraError(`local sandboxes need ${SANDBOX_PYTHON} (their entry script), which is missing on this host`);
    }
    const r = this.resources;
    const owner = this.sandboxOpts.hostUid ?? undefined;
    const dirs = await createSandboxDirs(this.rootDir, spec.label, {
      mountDisk: setup?.tmpfs ? (d) => mountDisk(d, r.disk_mib, owner) : undefined,
      owner,
      entryScript: ENTRY_SCRIPT,
    }).catch((err: unknown) => {
      throw new InfraError(`cannot create sandbox folders under ${this.rootDir}: ${errorMessage(err)}`, { cause: err });
    });
    let box: SandboxBox | null = null;
    if (setup) {
      const diskDir = setup.tmpfs ? dirs.disk : null;
      box = await SandboxBox.create(setup, path.basename(dirs.root), { resources: r, diskDir, diskPollMs: this.opts.diskPollMs ?? 2000 }).catch(async (err: unknown) => {
        await removeSandboxDirs(dirs).catch(() => {});
        throw err;
      });
    }
    const sandbox = new LocalBwrapSandbox(dirs, spec, this.sandboxOpts, box, (s) => this.live.delete(s));
    this.live.add(sandbox);
    this.opts.logger?.debug({ sandbox: sandbox.id, dir: dirs.root }, 'sandbox created');
    if (signal?.aborted) {
      await sandbox.destroy();
      signal.throwIfAborted();
    }
    return sandbox;
  }

  /** Which limits hold here (tried once, then cached). */
  async probe(): Promise<BoxReport> {
    if (this.opts.box === false) return uniformReport(false, 'the provider was created with box: false');
    // bwrap itself first: a missing one is named as such (a set-up step: exit 2), not as every limit it would have held failing.
    await this.ensureUsable().catch((err: unknown) => {
      throw bwrapMissing(err) ? new ConfigError((err as Error).message, { cause: err }) : err;
    });
    return (await this.boxSetup()).report;
  }

  /**
   * Removes what dead workers of this host left: sandbox folders (with their processes and tmpfs
   * mounts) and cgroups. Logs what it could not remove and goes on; returns how many it removed.
   */
  async reapOrphans(): Promise<number> {
    const warn = (what: string) => (target: string, err: unknown) =>
      this.opts.logger?.warn({ err: errorMessage(err), [what]: target }, `could not remove an orphaned sandbox ${what}`);
    const folders = await reapOrphanDirs(this.rootDir, warn('folder'));
    const cgroups = this.opts.box === false ? [] : await reapOrphanCgroups((await this.boxSetup()).cgroups, warn('cgroup'));
    const reaped = new Set([...folders, ...cgroups]).size;
    if (reaped > 0) this.opts.logger?.info({ reaped, folders: folders.length, cgroups: cgroups.length, root: this.rootDir }, 'removed orphaned sandboxes');
    const gateways = await reapOrphanGatewayDirs(this.opts.gatewaySocketDir ?? os.tmpdir());
    if (gateways > 0) this.opts.logger?.warn({ gateways }, 'removed gateway socket folders left behind by a dead worker of this host');
    return reaped;
  }

  /** Destroys every sandbox this provider created that is still alive (worker shutdown). */
  async close(): Promise<void> {
    await Promise.allSettled([...this.live].map((s) => s.destroy()));
  }

  /** Checks once that bwrap exists and can create its namespaces here. */
  private ensureUsable(): Promise<void> {
    this.usable ??= probeBwrap(this.sandboxOpts.bwrapPath).catch((err: unknown) => {
      this.usable = null;
      throw err;
    });
    return this.usable;
  }

  private boxSetup(): Promise<BoxSetup> {
    this.setup ??= setUpBox({
      resources: this.resources,
      rootDir: this.rootDir,
      bwrapPath: this.sandboxOpts.bwrapPath,
      cgroupPaths: this.opts.cgroupPaths ?? HOST_CGROUP_PATHS,
      seccompPython: this.opts.seccompPython ?? SECCOMP_PYTHON,
      hostUid: this.sandboxOpts.hostUid,
      extraRoBinds: this.sandboxOpts.extraRoBinds,
    });
    return this.setup;
  }
}
