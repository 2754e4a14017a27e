/**
 * The limits of one `local` sandbox while it lives: its cgroup (joined by every exec before it can
 * fork), its seccomp program, its rlimits, the watch on its tmpfs disk, and the limit hits counted
 * on the way. A command killed by the OOM killer comes back as an ordinary result with signal
 * SIGKILL; EAGAIN at the process limit and ENOSPC on a full disk reach the command itself.
 */
import type { BoxSetup } from './box-setup.ts';
import { SandboxCgroup, cgroupName, joinCommand } from './sandbox-cgroup.ts';
import { DiskWatch } from './sandbox-disk.ts';
import type { EntryOptions } from './bwrap-policy.ts';
import type { ExecResult, LimitHits, SandboxResources } from '../types.ts';

/** RLIMIT_NOFILE of sandboxed commands: ample for OpenCode and Python, small enough to bound kernel memory. */
export const SANDBOX_NOFILE = 4096;
/** bwrap reports a command killed by a signal as exit code 128 + signal. */
const EXIT_SIGKILL = 128 + 9;

export interface SandboxBoxOptions {
  resources: SandboxResources;
  /** The sandbox's tmpfs, when it has one (watched for being full). */
  diskDir: string | null;
  /** How often a running sandbox's disk is looked at, in milliseconds. */
  diskPollMs: number;
}

export class SandboxBox {
  private final: LimitHits | null = null;

  private constructor(
    private readonly cgroup: SandboxCgroup | null,
    private readonly seccomp: Buffer | null,
    private readonly disk: DiskWatch | null,
    private readonly resources: SandboxResources,
  ) {}

  /** Makes the sandbox's cgroup (when the host allows); throws InfraError when it cannot. */
  static async create(setup: BoxSetup, id: string, opts: SandboxBoxOptions): Promise<SandboxBox> {
    const hasCgroup = Object.keys(setup.cgroups.places).length > 0;
    const cgroup = hasCgroup ? await SandboxCgroup.create(setup.cgroups, cgroupName(id), opts.resources) : null;
    const disk = opts.diskDir ? new DiskWatch(opts.diskDir, opts.diskPollMs) : null;
    return new SandboxBox(cgroup, setup.seccomp, disk, opts.resources);
  }

  /**
   * The process to spawn for `command args`: the cgroup-join shell around it, when there is a cgroup.
   * A failed join prints `marker` on stderr and exits 125 (the caller reports it).
   */
  spawnCommand(command: string, args: string[], marker: string): { command: string; args: string[] } {
    return this.cgroup ? joinCommand(this.cgroup.procsFiles(), marker, command, args) : { command, args };
  }

  /** Bytes for the child's fd 3 (the seccomp program), or none. */
  extraFds(): Buffer[] {
    return this.seccomp ? [this.seccomp] : [];
  }

  /** The fd bwrap reads the seccomp program from, when there is one. */
  seccompFd(): number | undefined {
    return this.seccomp ? 3 : undefined;
  }

  entryLimits(): EntryOptions['rlimits'] {
    return { fsizeBytes: this.resources.disk_mib * 1024 * 1024, nofile: SANDBOX_NOFILE };
  }

  /** Runs one exec inside the box: watches the disk meanwhile and turns an OOM kill into signal SIGKILL. */
  async around(run: () => Promise<ExecResult>): Promise<ExecResult> {
    const oomBefore = (await this.cgroup?.oomKills()) ?? 0;
    this.disk?.execStarted();
    let result: ExecResult;
    try {
      result = await run();
    } finally {
      await this.disk?.execEnded();
    }
    const oomAfter = (await this.cgroup?.oomKills()) ?? 0;
    if (result.exitCode === EXIT_SIGKILL && oomAfter > oomBefore) return { ...result, exitCode: null, signal: 'SIGKILL' };
    return result;
  }

  async limitHits(): Promise<LimitHits> {
    if (this.final) return this.final;
    const hits: LimitHits = {};
    const memory = await this.cgroup?.oomKills();
    const pids = await this.cgroup?.pidsMaxHits();
    if (memory) hits.memory = memory;
    if (pids) hits.pids = pids;
    if (await this.disk?.check()) hits.disk = 1;
    return hits;
  }

  /** Kills everything left in the sandbox and keeps the final hits (read before the cgroup goes). */
  async kill(): Promise<void> {
    await this.cgroup?.kill();
    this.final = await this.limitHits();
    this.disk?.stop();
  }

  /** Removes the cgroup (after kill); throws what could not be removed. */
  async remove(): Promise<void> {
    this.final ??= await this.limitHits();
    this.disk?.stop();
    await this.cgroup?.remove();
  }
}
