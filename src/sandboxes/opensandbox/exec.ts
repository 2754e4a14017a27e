/**
 * One command in a remote sandbox through execd's streamed `POST /command`, with a timeout and an
 * abort. The SDK's streaming fetch stops honouring its abort signal once the response headers have
 * arrived, so stopping a command is: interrupt it (`DELETE /command?id=`), wait a short grace for the
 * stream to end with its final output, then return without it (the stream is torn down with the
 * sandbox or its connection pool).
 */
import type { Sandbox as SdkSandbox } from '@alibaba-group/opensandbox';
import { InfraError, errorMessage } from '../../shared/errors.ts';
import { TailBuffer } from '../output-capture.ts';
import type { ExecResult } from '../types.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export interface RemoteCommandOptions {
  /** A complete `bash -c` command line (already quoted). */
  command: string;
  cwd: string;
  env: Record<string, string>;
  timeoutMs?: number;
  signal: AbortSignal;
  onStdoutLine?: (line: string) => void;
  maxCaptureBytes: number;
  /** How long to wait for the stream to end after an interrupt, in milliseconds. */
  stopGraceMs: number;
}

export async function runRemoteCommand(sdk: SdkSandbox, opts: RemoteCommandOptions): Promise<ExecResult> {
  const started = Date.now();
  const stdout = new TailBuffer(opts.maxCaptureBytes);
  const stderr = new TailBuffer(opts.maxCaptureBytes);
  let timedOut = false;
  let aborted = false;
  let exitCode: number | null = null;
  let commandId: string | undefined;
  // Events that arrive after this exec has returned are dropped.
  let finished = false;
  let stopRequested: () => void = () => {};
  const stopped = new Promise<void>((resolve) => (stopRequested = resolve));
  const fetchAbort = new AbortController();
  const interrupt = (): void => void (commandId && sdk.commands.interrupt(commandId).catch(() => {}));
  const stop = (): void => {
    if (fetchAbort.signal.aborted) return;
    fetchAbort.abort();
    interrupt();
    stopRequested();
  };
  const onAbort = (): void => ((aborted = !timedOut), stop());
  const timer = opts.timeoutMs === undefined ? undefined : setTimeout(() => ((timedOut = true), stop()), opts.timeoutMs);
  opts.signal.addEventListener('abort', onAbort, { once: true });
  if (opts.signal.aborted) onAbort();

  const run = sdk.commands
    .run(
      opts.command,
      {
        workingDirectory: opts.cwd,
        envs: opts.env,
        // A server-side backstop in case this worker disappears mid-command.
        timeoutSeconds: opts.timeoutMs === undefined ? undefined : opts.timeoutMs / 1000 + 30,
      },
      {
        skipAccumulation: true,
        onInit: (init) => {
          commandId = init.id;
          if (fetchAbort.signal.aborted) interrupt();
        },
        // execd sends one event per output line, without its terminator.
        onStdout: (m) => {
          if (finished) return;
          stdout.push(Buffer.from(`${m.text}\n`));
          opts.onStdoutLine?.(m.text);
        },
        onStderr: (m) => void (finished || stderr.push(Buffer.from(`${m.text}\n`))),
      },
      fetchAbort.signal,
    )
    .then(
      (execution) => void (exitCode = execution.exitCode ?? null),
      (err: unknown) => {
        if (fetchAbort.signal.aborted) return;
        throw new InfraError(`opensandbox: command failed to run: ${errorMessage(err)}`, { cause: err });
      },
    );
  try {
    await Promise.race([run, stopped.then(() => sleep(opts.stopGraceMs))]);
  } finally {
    finished = true;
    clearTimeout(timer);
    opts.signal.removeEventListener('abort', onAbort);
    run.catch(() => {});
  }
  return { exitCode, signal: null, stdout: stdout.toString(), stderr: stderr.toString(), timedOut, aborted, durationMs: Date.now() - started };
}
