/**
 * One `local` sandbox: its host folders, the files the worker puts in and gets out, and its commands,
 * each run as its own bwrap process inside the sandbox's box (sandbox-box.ts) when it has one. A root
 * worker runs every command through the launcher (sandbox-launch.py): the sandbox's processes are host
 * uid `hostUid`, never root, and a bridge outside the sandbox serves its gateway and tells the
 * agent's own connections from the others.
 */
import { randomBytes } from 'node:crypto';
import { lchown, readFile, realpath, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { InfraError, errorMessage } from '../../shared/errors.ts';
import { SANDBOX_PYTHON, buildBwrapArgs, sandboxCommand } from './bwrap-policy.ts';
import { SANDBOX_PATH, terminateBwrap } from './bwrap-process.ts';
import { ExecTracker } from '../exec-tracker.ts';
import { THREAD_ENV } from '../sandbox-env.ts';
import { runProcess } from './process-runner.ts';
import type { SandboxBox } from './sandbox-box.ts';
import { forgetExec, recordExec, removeSandboxDirs, stopBridge, type SandboxDirs } from './sandbox-dirs.ts';
import { mapSandboxPath, resolveForRead, resolveForWrite, type PathMount } from './sandbox-paths.ts';
import type { ExecOptions, ExecResult, LimitHits, Sandbox, SandboxSpec } from '../types.ts';

/** What every sandbox of a provider shares. */
export interface SandboxOptions {
  workdir: string;
  extraRoBinds: string[];
  bwrapPath: string;
  killGraceMs: number;
  maxCaptureBytes: number;
  /** A root worker's sandboxes run as this host uid (and gid) through the launcher; null: as this process. */
  hostUid: number | null;
}

/** The script every sandboxed command starts with (its limits, the in-sandbox bridge, then exec). */
export const ENTRY_SCRIPT = fileURLToPath(new URL('../box/sandbox-entry.py', import.meta.url));
/** The launcher a root worker runs bwrap through (sandbox-launch.py). */
export const LAUNCH_SCRIPT = fileURLToPath(new URL('./sandbox-launch.py', import.meta.url));
/** The exit code of the cgroup join shell and of the launcher when they fail (with the marker on stderr). */
const SETUP_FAILED = 125;

export class LocalBwrapSandbox implements Sandbox {
  readonly id: string;
  readonly gatewayUrl: string;
  private readonly stop = new AbortController();
  private readonly running = new ExecTracker();
  private destroying: Promise<void> | null = null;
  private readonly mounts: PathMount[];
  /** Printed by the cgroup join and the launcher when they fail; unknown to the sandboxed code, so it cannot fake it. */
  private readonly marker = `vcfleet-box-${randomBytes(8).toString('hex')}:`;

  constructor(
    private readonly dirs: SandboxDirs,
    private readonly spec: SandboxSpec,
    private readonly opts: SandboxOptions,
    private readonly box: SandboxBox | null,
    private readonly onDestroyed: (s: LocalBwrapSandbox) => void,
  ) {
    this.id = path.basename(dirs.root);
    this.gatewayUrl = `http://127.0.0.1:${spec.gateway.port}`;
    this.mounts = [
      { inSandbox: opts.workdir, host: dirs.workspace },
      { inSandbox: '/tmp', host: dirs.tmp },
    ];
  }

  get workdir(): string {
    return this.opts.workdir;
  }

  async putFile(pathInSandbox: string, content: Buffer | string): Promise<void> {
    const target = mapSandboxPath(pathInSandbox, this.workdir, this.mounts);
    const file = await resolveForWrite(target, pathInSandbox);
    await writeFile(file, content);
    const uid = this.opts.hostUid;
    if (uid === null) return;
    // The sandbox runs as another uid: what it is given must be its own (the folders made for it too).
    const base = await realpath(target.base);
    for (let p = file; p.startsWith(`${base}/`); p = path.dirname(p)) await lchown(p, uid, uid);
  }

  async getFile(pathInSandbox: string): Promise<Buffer> {
    const target = mapSandboxPath(pathInSandbox, this.workdir, this.mounts);
    return readFile(await resolveForRead(target, pathInSandbox));
  }

  exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    return this.running.track(this.id, this.stop.signal.aborted, argv, () =>
      this.box ? this.box.around(() => this.run(argv, options)) : this.run(argv, options),
    );
  }

  async limitHits(): Promise<LimitHits> {
    return (await this.box?.limitHits()) ?? {};
  }

  /**
   * The gateway bridge outside the sandbox (a root worker's launcher): port, the socket of the agent's
   * connections and the socket of the others (the same one when the gateway has no agent socket).
   */
  private outsideBridge(): [number, string, string] | null {
    const g = this.spec.gateway;
    return this.opts.hostUid !== null && g.socketPath ? [g.port, g.agentSocketPath ?? g.socketPath, g.socketPath] : null;
  }

  private bwrapArgs(argv: string[], options: ExecOptions): string[] {
    const bridged = this.outsideBridge() !== null;
    // Without the bridge outside, the socket is bound in and the entry script bridges it inside.
    const socket = bridged ? undefined : this.spec.gateway.socketPath;
    const entry = { rlimits: this.box?.entryLimits(), gatewayPort: socket ? this.spec.gateway.port : undefined };
    const usesEntry = entry.rlimits !== undefined || entry.gatewayPort !== undefined;
    const args = buildBwrapArgs({
      workspaceHostDir: this.dirs.workspace,
      tmpHostDir: this.dirs.tmp,
      shmHostDir: this.dirs.shm,
      emptyFile: this.dirs.emptyFile,
      emptyDir: this.dirs.emptyDir,
      workdir: this.workdir,
      cwd: options.cwd ?? this.workdir,
      extraRoBinds: this.opts.extraRoBinds,
      gatewaySocket: socket,
      shareNet: bridged,
      entryScript: usesEntry ? this.dirs.entryScript : undefined,
      seccompFd: this.box?.seccompFd(),
    });
    return [...args, '--', ...sandboxCommand(argv, entry)];
  }

  /** bwrap, or the launcher around it (a root worker), as command and arguments. */
  private bwrapCommand(args: string[]): { command: string; args: string[] } {
    const uid = this.opts.hostUid;
    if (uid === null) return { command: this.opts.bwrapPath, args };
    const bridge = this.outsideBridge();
    const launch = ['-I', '-S', LAUNCH_SCRIPT, '--uid', String(uid), '--marker', this.marker, ...(bridge ? ['--bridge', ...bridge.map(String), this.dirs.execs] : [])];
    return { command: SANDBOX_PYTHON, args: [...launch, '--', this.opts.bwrapPath, ...args] };
  }

  private async run(argv: string[], options: ExecOptions): Promise<ExecResult> {
    const inner = this.bwrapCommand(this.bwrapArgs(argv, options));
    const spawnAs = this.box?.spawnCommand(inner.command, inner.args, this.marker) ?? inner;
    let recorded: Promise<void> = Promise.resolve();
    let pid: number | undefined;
    try {
      const result = await runProcess({
        ...spawnAs,
        env: this.envFor(options.env),
        stdin: options.stdin,
        timeoutMs: options.timeoutMs,
        signal: options.signal ? AbortSignal.any([options.signal, this.stop.signal]) : this.stop.signal,
        onStdoutLine: options.onStdoutLine,
        maxCaptureBytes: this.opts.maxCaptureBytes,
        terminate: (child) => terminateBwrap(child, this.opts.killGraceMs),
        extraFds: this.box?.extraFds(),
        onSpawn: (p) => {
          pid = p;
          recorded = recordExec(this.dirs, p).catch(() => {});
        },
      });
      if (result.exitCode === SETUP_FAILED && result.stderr.startsWith(this.marker)) {
        throw new InfraError(`the sandbox command could not be set up: ${result.stderr.slice(this.marker.length).trim()}`);
      }
      return result;
    } finally {
      await recorded;
      if (pid !== undefined) await forgetExec(this.dirs, pid).catch(() => {});
      // The launcher's gateway bridge dies with bwrap; the command is over once it is gone too.
      if (pid !== undefined) await stopBridge(this.dirs, pid).catch(() => {});
    }
  }

  /** The command's whole environment: defaults, then the spec's, then the exec's. */
  private envFor(extra: Record<string, string> | undefined): Record<string, string> {
    return { PATH: SANDBOX_PATH, HOME: '/tmp/home', TMPDIR: '/tmp', LANG: 'C.UTF-8', ...THREAD_ENV, ...this.spec.env, ...extra };
  }

  /**
   * Stops every command, kills what is left in the cgroup, then removes the disk, the folders and
   * the cgroup. Every step runs even if one fails; the failures are thrown together at the end.
   */
  destroy(): Promise<void> {
    this.destroying ??= (async () => {
      this.stop.abort();
      await this.running.settled();
      const failures: string[] = [];
      const step = (what: string, p: Promise<void> | undefined) => p?.catch((err: unknown) => void failures.push(`${what}: ${errorMessage(err)}`));
      await step('kill', this.box?.kill());
      await step('folders', removeSandboxDirs(this.dirs));
      await step('cgroup', this.box?.remove());
      this.onDestroyed(this);
      if (failures.length > 0) throw new InfraError(`sandbox ${this.id} was not fully removed: ${failures.join('; ')}`);
    })();
    return this.destroying;
  }
}
