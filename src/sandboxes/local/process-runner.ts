/**
 * Run one host process to completion: stdin written then closed, stdout split into lines, output
 * tails captured, and a timeout or an abort that ends it through a caller-given `terminate`.
 * A non-zero exit is a result; only failing to start the process throws.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { InfraError } from '../../shared/errors.ts';
import { LineSplitter, TailBuffer } from '../output-capture.ts';
import type { ExecResult } from '../types.ts';

export interface RunProcessOptions {
  command: string;
  args: string[];
  /** The child's whole environment (the worker's own environment is never inherited). */
  env: Record<string, string>;
  stdin?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
  onStdoutLine?: (line: string) => void;
  /** Cap of `stdout`/`stderr` kept in the result, in bytes (the tail is kept). */
  maxCaptureBytes: number;
  /** Ends the process and everything it started; called at most once. */
  terminate: (child: ChildProcess) => Promise<void>;
  /** Called once the process runs (to record its pid). */
  onSpawn?: (pid: number) => void;
  /** Written, then closed, to the child's fds 3, 4, ... (e.g. a seccomp program for bwrap). */
  extraFds?: Buffer[];
}

function emptyResult(aborted: boolean): ExecResult {
  return { exitCode: null, signal: null, stdout: '', stderr: '', timedOut: false, aborted, durationMs: 0 };
}

/** Runs the process; resolves when it has exited and its output pipes are closed. */
export function runProcess(opts: RunProcessOptions): Promise<ExecResult> {
  if (opts.signal?.aborted) return Promise.resolve(emptyResult(true));
  const started = Date.now();
  const extra = opts.extraFds ?? [];
  // Its own session and process group: a terminal's Ctrl-C (SIGINT to the foreground process group)
  // reaches vcfleet only, which hands the rollout back; the sandbox still dies with its parent.
  const child = spawn(opts.command, opts.args, { env: opts.env, detached: true, stdio: ['pipe', 'pipe', 'pipe', ...extra.map(() => 'pipe' as const)] });
  extra.forEach((bytes, i) => {
    const fd = child.stdio[3 + i] as NodeJS.WritableStream;
    // The reader may exit without reading it all: EPIPE is expected then.
    fd.on('error', () => {});
    fd.end(bytes);
  });
  const stdout = new TailBuffer(opts.maxCaptureBytes);
  const stderr = new TailBuffer(opts.maxCaptureBytes);
  const lines = opts.onStdoutLine ? new LineSplitter(opts.onStdoutLine) : null;
  let timedOut = false;
  let aborted = false;
  let terminating: Promise<void> | null = null;
  const stop = (): void => {
    terminating ??= opts.terminate(child).catch(() => void child.kill('SIGKILL'));
  };
  const timer =
    opts.timeoutMs !== undefined ? setTimeout(() => ((timedOut = true), stop()), opts.timeoutMs) : undefined;
  const onAbort = (): void => {
    aborted = true;
    stop();
  };
  opts.signal?.addEventListener('abort', onAbort, { once: true });

  child.stdout.on('data', (chunk: Buffer) => {
    stdout.push(chunk);
    lines?.push(chunk);
  });
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
  // The command may exit without reading its stdin: EPIPE is expected then.
  child.stdin.on('error', () => {});
  child.stdin.end(opts.stdin ?? '');

  return new Promise<ExecResult>((resolve, reject) => {
    const cleanup = (): void => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    };
    child.once('spawn', () => opts.onSpawn?.(child.pid!));
    child.once('error', (err) => {
      cleanup();
      reject(new InfraError(`cannot start ${opts.command}: ${err.message}`, { cause: err }));
    });
    child.once('close', (code, signal) => {
      cleanup();
      lines?.flush();
      void (terminating ?? Promise.resolve()).then(() =>
        resolve({
          exitCode: code,
          signal,
          stdout: stdout.toString(),
          stderr: stderr.toString(),
          timedOut,
          aborted: aborted && !timedOut,
          durationMs: Date.now() - started,
        }),
      );
    });
  });
}
