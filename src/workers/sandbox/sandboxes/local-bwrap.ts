/**
 * The `local` provider: one bubblewrap sandbox per task on the worker's own host.
 *
 * A sandbox is a set of host folders plus a policy (bwrap-policy.ts); every `exec` is its own bwrap
 * process with its own PID namespace, so killing that bwrap kills everything the command started,
 * including `setsid` daemons (OpenCode's bash tools). The policy model is reachable only through
 * the task's gateway: its Unix socket is bound into the sandbox and bridge.py serves it on
 * `http://127.0.0.1:<gateway.port>` inside the sandbox's own network namespace.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { InfraError } from '../../../shared/errors.ts';
import type { Logger } from '../../../shared/logger.ts';
import { SANDBOX_PYTHON, buildBwrapArgs, namespaceArgs, sandboxCommand } from './bwrap-policy.ts';
import { DEFAULT_MAX_CAPTURE_BYTES } from './output-capture.ts';
import { runProcess } from './process-runner.ts';
import { namespaceMembers, signalQuietly } from './proc-tree.ts';
import {
  createSandboxDirs, defaultSandboxRoot, forgetExec, reapOrphanDirs, recordExec, removeSandboxDirs,
  type SandboxDirs,
} from './sandbox-dirs.ts';
import { mapSandboxPath, resolveForRead, resolveForWrite, type PathMount } from './sandbox-paths.ts';
import { ExecTracker } from './exec-tracker.ts';
import type { ExecOptions, ExecResult, Sandbox, SandboxProvider, SandboxSpec } from './types.ts';

export interface LocalBwrapOptions {
  /** Parent folder of the sandbox folders; default `os.tmpdir()/vcfleet-sandboxes`. */
  rootDir?: string;
  /** The work folder inside the sandbox (`sandbox_workdir`), e.g. `/workspace`. */
  workdir: string;
  /** Host paths visible read-only at the same path inside (e.g. the OpenCode binary's folder). */
  extraRoBinds?: string[];
  /** The bubblewrap binary; default `/usr/bin/bwrap` (or `bwrap` on the PATH when absent). */
  bwrapPath?: string;
  /** Between SIGTERM to the sandbox's processes and SIGKILL, in milliseconds; default 2000. */
  killGraceMs?: number;
  /** Bytes of `stdout` and of `stderr` kept in an ExecResult (the tail); default 16 MiB each. */
  maxCaptureBytes?: number;
  logger?: Logger;
}

/** PATH inside the sandbox unless the spec or the exec sets one. */
export const SANDBOX_PATH = '/usr/local/bin:/usr/bin:/bin';
const INSTALL_HINT =
  'install bubblewrap (`apt-get install bubblewrap`) or use sandbox_provider=opensandbox';
const BRIDGE_SCRIPT = fileURLToPath(new URL('./bridge.py', import.meta.url));

function defaultBwrapPath(): string {
  return existsSync('/usr/bin/bwrap') ? '/usr/bin/bwrap' : 'bwrap';
}

function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (hasExited(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(hasExited(child)), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * SIGTERM every process of the bwrap's PID namespace, then, if the command has not exited within
 * the grace, SIGKILL the bwrap itself: its namespace init dies with it (`--die-with-parent`), and
 * with the init the kernel kills every process left in the namespace.
 */
async function terminateBwrap(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.pid === undefined || hasExited(child)) return;
  for (const pid of namespaceMembers(child.pid)) signalQuietly(pid, 'SIGTERM');
  if (!(await waitForExit(child, graceMs))) child.kill('SIGKILL');
}

class LocalBwrapSandbox implements Sandbox {
  readonly id: string;
  readonly gatewayUrl: string;
  private readonly stop = new AbortController();
  private readonly running = new ExecTracker();
  private destroying: Promise<void> | null = null;
  private readonly mounts: PathMount[];

  constructor(
    private readonly dirs: SandboxDirs,
    private readonly spec: SandboxSpec,
    private readonly opts: Required<Omit<LocalBwrapOptions, 'logger' | 'rootDir'>>,
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
    await writeFile(await resolveForWrite(target, pathInSandbox), content);
  }

  async getFile(pathInSandbox: string): Promise<Buffer> {
    const target = mapSandboxPath(pathInSandbox, this.workdir, this.mounts);
    return readFile(await resolveForRead(target, pathInSandbox));
  }

  exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    return this.running.track(this.id, this.stop.signal.aborted, argv, () => this.run(argv, options));
  }

  private async run(argv: string[], options: ExecOptions): Promise<ExecResult> {
    const socket = this.spec.gateway.socketPath;
    const args = buildBwrapArgs({
      workspaceHostDir: this.dirs.workspace,
      tmpHostDir: this.dirs.tmp,
      workdir: this.workdir,
      cwd: options.cwd ?? this.workdir,
      extraRoBinds: this.opts.extraRoBinds,
      gatewaySocket: socket,
      bridgeScript: socket ? BRIDGE_SCRIPT : undefined,
    });
    args.push('--', ...sandboxCommand(argv, socket ? this.spec.gateway.port : undefined));
    let recorded: Promise<void> = Promise.resolve();
    let pid: number | undefined;
    try {
      return await runProcess({
        command: this.opts.bwrapPath,
        args,
        env: this.envFor(options.env),
        stdin: options.stdin,
        timeoutMs: options.timeoutMs,
        signal: options.signal ? AbortSignal.any([options.signal, this.stop.signal]) : this.stop.signal,
        onStdoutLine: options.onStdoutLine,
        maxCaptureBytes: this.opts.maxCaptureBytes,
        terminate: (child) => terminateBwrap(child, this.opts.killGraceMs),
        onSpawn: (p) => {
          pid = p;
          recorded = recordExec(this.dirs, p).catch(() => {});
        },
      });
    } finally {
      await recorded;
      if (pid !== undefined) await forgetExec(this.dirs, pid).catch(() => {});
    }
  }

  /** The command's whole environment: defaults, then the spec's, then the exec's. */
  private envFor(extra: Record<string, string> | undefined): Record<string, string> {
    return {
      PATH: SANDBOX_PATH,
      HOME: '/tmp/home',
      TMPDIR: '/tmp',
      LANG: 'C.UTF-8',
      ...this.spec.env,
      ...extra,
    };
  }

  async limitHits(): Promise<Record<string, number>> {
    // No limits are enforced here yet, so none can be hit.
    return {};
  }

  destroy(): Promise<void> {
    this.destroying ??= (async () => {
      this.stop.abort();
      await this.running.settled();
      await removeSandboxDirs(this.dirs);
      this.onDestroyed(this);
    })();
    return this.destroying;
  }
}

export class LocalBwrapProvider implements SandboxProvider {
  readonly name = 'local' as const;
  private readonly live = new Set<LocalBwrapSandbox>();
  private probe: Promise<void> | null = null;
  private readonly rootDir: string;
  private readonly sandboxOpts: Required<Omit<LocalBwrapOptions, 'logger' | 'rootDir'>>;

  constructor(private readonly opts: LocalBwrapOptions) {
    this.rootDir = opts.rootDir ?? defaultSandboxRoot();
    this.sandboxOpts = {
      workdir: opts.workdir,
      extraRoBinds: opts.extraRoBinds ?? [],
      bwrapPath: opts.bwrapPath ?? defaultBwrapPath(),
      killGraceMs: opts.killGraceMs ?? 2000,
      maxCaptureBytes: opts.maxCaptureBytes ?? DEFAULT_MAX_CAPTURE_BYTES,
    };
  }

  async create(spec: SandboxSpec, signal?: AbortSignal): Promise<Sandbox> {
    signal?.throwIfAborted();
    await this.ensureUsable();
    if (spec.gateway.socketPath && !existsSync(SANDBOX_PYTHON)) {
      throw new InfraError(`the gateway bridge needs ${SANDBOX_PYTHON}, which is missing on this host`);
    }
    const dirs = await createSandboxDirs(this.rootDir, spec.label).catch((err: unknown) => {
      throw new InfraError(`cannot create sandbox folders under ${this.rootDir}`, { cause: err });
    });
    const sandbox = new LocalBwrapSandbox(dirs, spec, this.sandboxOpts, (s) => this.live.delete(s));
    this.live.add(sandbox);
    this.opts.logger?.debug({ sandbox: sandbox.id, dir: dirs.root }, 'sandbox created');
    if (signal?.aborted) {
      await sandbox.destroy();
      signal.throwIfAborted();
    }
    return sandbox;
  }

  async reapOrphans(): Promise<number> {
    const reaped = await reapOrphanDirs(this.rootDir);
    if (reaped > 0) this.opts.logger?.info({ reaped, root: this.rootDir }, 'removed orphaned sandboxes');
    return reaped;
  }

  /** Destroys every sandbox this provider created that is still alive (worker shutdown). */
  async close(): Promise<void> {
    await Promise.allSettled([...this.live].map((s) => s.destroy()));
  }

  /** Checks once that bwrap exists and can create its namespaces here. */
  private ensureUsable(): Promise<void> {
    this.probe ??= probeBwrap(this.sandboxOpts.bwrapPath).catch((err: unknown) => {
      this.probe = null;
      throw err;
    });
    return this.probe;
  }
}

function probeBwrap(bwrapPath: string): Promise<void> {
  const args = [...namespaceArgs(), '--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev', '--', 'true'];
  return new Promise((resolve, reject) => {
    execFile(bwrapPath, args, { env: { PATH: SANDBOX_PATH }, timeout: 15_000 }, (err, _out, stderr) => {
      if (!err) return resolve();
      const code = (err as NodeJS.ErrnoException).code;
      const why =
        code === 'ENOENT'
          ? `bubblewrap not found at ${bwrapPath}`
          : `bubblewrap cannot create its namespaces here (${String(stderr).trim() || err.message})`;
      reject(new InfraError(`local sandbox unavailable: ${why}; ${INSTALL_HINT}`, { cause: err }));
    });
  });
}
