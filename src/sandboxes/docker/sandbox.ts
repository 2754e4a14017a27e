/**
 * One `docker` sandbox: a container of the sandbox image whose root filesystem is read-only and
 * whose writable places (the workdir, /tmp, /dev/shm) are tmpfs mounts. The real engine refuses
 * `PUT /archive` into a read-only root filesystem, and a copy beneath a tmpfs mount lands in the
 * layer the mount hides, so files go in and out through commands instead: `cat > file` with the
 * bytes on stdin, `cat file` with them on stdout, both as the image's (unprivileged) user.
 *
 * Commands run as the image's user; the gateway bridge and the limit watcher run as `nobody`, a
 * user the sandboxed code cannot signal. When a command ends or is stopped (timeout, abort), every
 * process of the image's user in the container is killed, daemons included, as a `local` sandbox's
 * PID namespace does (once no other command runs); if even that kill cannot start (the process
 * limit is full), the container is killed, and the sandbox with it.
 */
import path from 'node:path';
import { PassThrough, type Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type Docker from 'dockerode';
import { InfraError, errorMessage } from '../../shared/errors.ts';
import { ExecTracker } from '../exec-tracker.ts';
import { THREAD_ENV } from '../sandbox-env.ts';
import type { ExecOptions, ExecResult, LimitHits, Sandbox } from '../types.ts';
import { runDockerExec } from './exec.ts';
import { WATCH_SCRIPT, parseLimitReading, watchArgs, type LimitReading } from './limits.ts';

/** What every sandbox of a provider shares. */
export interface DockerSandboxOptions {
  workdir: string;
  /** The image's user, who runs every command (never root). */
  user: string;
  /** The user of the bridge and the limit reader (`nobody`). */
  helperUser: string;
  /** The tmpfs mounts watched for being full. */
  diskMounts: string[];
  killGraceMs: number;
  maxCaptureBytes: number;
  /** Largest file getFile reads, in bytes (the sandbox's disk). */
  maxFileBytes: number;
}

export class DockerSandbox implements Sandbox {
  private readonly stop = new AbortController();
  private readonly running = new ExecTracker();
  private destroying: Promise<void> | null = null;
  private reading: LimitReading | null = null;
  private watcher: Duplex | null = null;
  private readonly waiters: Array<() => void> = [];
  /** Commands of exec() running now. */
  private active = 0;

  constructor(
    private readonly container: Docker.Container,
    readonly gatewayUrl: string,
    private readonly env: Record<string, string>,
    private readonly opts: DockerSandboxOptions,
    private readonly onDestroyed: (s: DockerSandbox) => void,
  ) {}

  get id(): string {
    return this.container.id.slice(0, 12);
  }

  get workdir(): string {
    return this.opts.workdir;
  }

  private resolve(p: string): string {
    return path.posix.resolve(this.workdir, p);
  }

  async putFile(pathInSandbox: string, content: Buffer | string): Promise<void> {
    const file = this.resolve(pathInSandbox);
    const r = await this.internal(['/bin/sh', '-c', 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"', 'put', file], { stdin: typeof content === 'string' ? Buffer.from(content) : content });
    if (r.exitCode !== 0) throw new InfraError(`docker: cannot write ${pathInSandbox} in the sandbox: ${r.stderr.trim() || `exit code ${r.exitCode}`}`);
  }

  async getFile(pathInSandbox: string): Promise<Buffer> {
    const file = this.resolve(pathInSandbox);
    const chunks: Buffer[] = [];
    let size = 0;
    let tooBig = false;
    const r = await this.internal(['/bin/cat', '--', file], {
      onChunk: (b) => {
        size += b.length;
        if (size > this.opts.maxFileBytes) tooBig = true;
        else chunks.push(b);
      },
    });
    if (tooBig) throw new InfraError(`docker: ${pathInSandbox} in the sandbox is larger than its ${this.opts.maxFileBytes} bytes of disk`);
    if (r.exitCode !== 0) throw new InfraError(`docker: cannot read ${pathInSandbox} in the sandbox: ${r.stderr.trim() || `exit code ${r.exitCode}`}`);
    return Buffer.concat(chunks);
  }

  exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    return this.running.track(this.id, this.stop.signal.aborted, argv, async () => {
      this.active++;
      try {
        return await runDockerExec(this.container, {
          argv,
          user: this.opts.user,
          cwd: options.cwd ?? this.workdir,
          env: { HOME: '/tmp/home', TMPDIR: '/tmp', LANG: 'C.UTF-8', ...THREAD_ENV, ...this.env, ...options.env },
          stdin: options.stdin,
          timeoutMs: options.timeoutMs,
          signal: options.signal ? AbortSignal.any([options.signal, this.stop.signal]) : this.stop.signal,
          onStdoutLine: options.onStdoutLine,
          maxCaptureBytes: this.opts.maxCaptureBytes,
          stop: () => this.killCommands(),
          stopGraceMs: this.opts.killGraceMs,
        });
      } finally {
        // What the command left running (daemons, a fork storm's children) ends with it, as in a
        // `local` sandbox, once no other command of the sandbox runs.
        if (--this.active === 0 && !this.stop.signal.aborted) await this.killCommands();
      }
    });
  }

  /** A command of the worker's own (files in and out), as the image's user; no sweep after it (it starts nothing). */
  private internal(argv: string[], o: { stdin?: Buffer; onChunk?: (b: Buffer) => void }): Promise<ExecResult> {
    return this.running.track(this.id, this.stop.signal.aborted, argv, () =>
      runDockerExec(this.container, {
        argv,
        user: this.opts.user,
        cwd: '/',
        env: {},
        stdin: o.stdin,
        signal: this.stop.signal,
        onStdoutChunk: o.onChunk,
        maxCaptureBytes: 64 * 1024,
        stop: () => this.killCommands(),
        stopGraceMs: this.opts.killGraceMs,
      }),
    );
  }

  /** Kills every process of the image's user here (the bridge and the watcher are another user's). */
  private async killCommands(): Promise<void> {
    try {
      const r = await runDockerExec(this.container, {
        argv: ['/bin/sh', '-c', 'kill -KILL -1'],
        user: this.opts.user,
        cwd: '/',
        env: {},
        signal: new AbortController().signal,
        maxCaptureBytes: 4096,
        stop: async () => {},
        stopGraceMs: 0,
        timeoutMs: 10_000,
      });
      if (r.exitCode === 0 || r.exitCode === 1) return;
    } catch {
      // Below: the kill could not even start.
    }
    await this.container.kill().catch(() => {});
  }

  /**
   * Starts the limit watcher (limits.ts) as the helper user, for the container's life. Its stdin
   * stays open: a line on it asks for a fresh reading; closing it ends the watcher.
   */
  async startWatcher(): Promise<void> {
    const exec = await this.container.exec({
      Cmd: ['python3', '-I', '-S', '-c', WATCH_SCRIPT, ...watchArgs(this.opts.diskMounts)],
      User: this.opts.helperUser,
      WorkingDir: '/',
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
    });
    const stream = (await exec.start({ hijack: true, stdin: true })) as Duplex;
    const out = new PassThrough();
    let pending = Buffer.alloc(0);
    out.on('data', (b: Buffer) => {
      pending = Buffer.concat([pending, b]);
      for (let i = pending.indexOf(10); i !== -1; i = pending.indexOf(10)) {
        const line = pending.subarray(0, i).toString('utf8');
        pending = pending.subarray(i + 1);
        try {
          this.reading = parseLimitReading(line);
        } catch {
          continue;
        }
        for (const w of this.waiters.splice(0)) w();
      }
      if (pending.length > 4096) pending = Buffer.alloc(0);
    });
    this.container.modem.demuxStream(stream, out, new PassThrough().resume());
    stream.on('error', () => {});
    stream.once('close', () => {
      this.watcher = null;
      for (const w of this.waiters.splice(0)) w();
    });
    this.watcher = stream;
    await this.fresh();
    if (!this.reading) throw new InfraError('docker: the sandbox\'s limit watcher did not start (the image needs python3)');
  }

  /** Asks the watcher for a reading and waits for it (at most 5 s; the last one otherwise). */
  private async fresh(): Promise<void> {
    const watcher = this.watcher;
    if (!watcher) return;
    const next = new Promise<void>((resolve) => this.waiters.push(resolve));
    watcher.write('\n');
    await Promise.race([next, sleep(5000, undefined, { ref: false })]);
  }

  async limitHits(): Promise<LimitHits> {
    if (!this.destroying) await this.fresh();
    const r = this.reading;
    const hits: LimitHits = {};
    if (r && r.oomKills > 0) hits.memory = r.oomKills;
    if (r && r.pidsMax > 0) hits.pids = r.pidsMax;
    if (r?.diskFull) hits.disk = 1;
    return hits;
  }

  /** Stops every command, then removes the container with everything in it. Throws only when the engine would not remove it. */
  destroy(): Promise<void> {
    this.destroying ??= (async () => {
      await this.fresh();
      this.stop.abort();
      await this.running.settled();
      try {
        await this.container.remove({ force: true, v: true });
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode !== 404) {
          throw new InfraError(`docker: sandbox ${this.id} was not removed: ${errorMessage(err)}`, { cause: err });
        }
      } finally {
        this.watcher?.destroy();
        this.onDestroyed(this);
      }
    })();
    return this.destroying;
  }
}
