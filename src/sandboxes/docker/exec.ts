/**
 * One command in a `docker` sandbox: a Docker exec (`POST /containers/{id}/exec`, then its start
 * hijacked), with stdin written and closed, stdout and stderr demultiplexed into bounded tails, a
 * timeout and an abort. Docker has no call that kills an exec, so stopping one is the caller's
 * `stop()` (the sandbox kills its processes), then a short grace for the stream to end with its
 * final output; the exit code is what the engine recorded for the exec's process.
 */
import { PassThrough, type Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { InfraError, errorMessage } from '../../shared/errors.ts';
import { LineSplitter, TailBuffer } from '../output-capture.ts';
import type { ExecResult } from '../types.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export interface DockerExecOptions {
  argv: string[];
  user: string;
  cwd: string;
  env: Record<string, string>;
  /** Written to stdin, which is then closed; without it stdin is not attached (reads see EOF). */
  stdin?: string | Buffer;
  timeoutMs?: number;
  signal: AbortSignal;
  onStdoutLine?: (line: string) => void;
  /** Bytes of stdout and of stderr kept (the tail). */
  maxCaptureBytes: number;
  /** Kills the command's processes when it is stopped (timeout, abort). */
  stop(): Promise<void>;
  /** After `stop()`, how long to wait for the stream to end, in milliseconds. */
  stopGraceMs: number;
  /** Every stdout chunk as it arrives, before the tail is cut (file downloads count and bound them). */
  onStdoutChunk?: (chunk: Buffer) => void;
}

export async function runDockerExec(container: Docker.Container, opts: DockerExecOptions): Promise<ExecResult> {
  const started = Date.now();
  const stdout = new TailBuffer(opts.maxCaptureBytes);
  const stderr = new TailBuffer(opts.maxCaptureBytes);
  const lines = opts.onStdoutLine ? new LineSplitter(opts.onStdoutLine) : null;
  if (opts.signal.aborted) return { exitCode: null, signal: null, stdout: '', stderr: '', timedOut: false, aborted: true, durationMs: 0 };
  const withStdin = opts.stdin !== undefined;
  let exec: Docker.Exec;
  let stream: Duplex;
  try {
    exec = await container.exec({
      Cmd: opts.argv,
      User: opts.user,
      WorkingDir: opts.cwd,
      Env: Object.entries(opts.env).map(([k, v]) => `${k}=${v}`),
      AttachStdin: withStdin,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
    });
    stream = (await exec.start({ hijack: true, stdin: withStdin })) as Duplex;
  } catch (err) {
    throw new InfraError(`docker: command failed to run: ${errorMessage(err)}`, { cause: err });
  }
  let finished = false;
  const out = new PassThrough();
  const err = new PassThrough();
  out.on('data', (b: Buffer) => {
    if (finished) return;
    opts.onStdoutChunk?.(b);
    stdout.push(b);
    lines?.push(b);
  });
  err.on('data', (b: Buffer) => void (finished || stderr.push(b)));
  container.modem.demuxStream(stream, out, err);
  const ended = new Promise<void>((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', () => resolve());
  });
  if (withStdin) {
    // A command that never reads its stdin must not stall the write: errors (EPIPE) are ignored.
    stream.on('error', () => {});
    stream.end(opts.stdin);
  }

  let timedOut = false;
  let aborted = false;
  let stopRequested: () => void = () => {};
  const stopped = new Promise<void>((resolve) => (stopRequested = resolve));
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void opts.stop().catch(() => {}).finally(stopRequested);
  };
  const onAbort = (): void => ((aborted = !timedOut), stop());
  const timer = opts.timeoutMs === undefined ? undefined : setTimeout(() => ((timedOut = true), stop()), opts.timeoutMs);
  opts.signal.addEventListener('abort', onAbort, { once: true });
  // An abort while the exec was being created.
  if (opts.signal.aborted) onAbort();
  try {
    await Promise.race([ended, stopped.then(() => Promise.race([ended, sleep(opts.stopGraceMs)]))]);
  } finally {
    clearTimeout(timer);
    opts.signal.removeEventListener('abort', onAbort);
  }
  lines?.flush();
  finished = true;
  stream.destroy();
  const info = await exec.inspect().catch(() => null);
  // Still running after a stop: the process is gone with the sandbox, its code unknown.
  const exitCode = info && !info.Running && typeof info.ExitCode === 'number' ? info.ExitCode : null;
  return { exitCode, signal: null, stdout: stdout.toString(), stderr: stderr.toString(), timedOut, aborted, durationMs: Date.now() - started };
}
