/** A real `vcfleet worker sandbox` OS process for the benchmarks, ready once it logs that it started. */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { deferred } from './fleet.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

export interface WorkerProcess {
  child: ChildProcess;
  ready: Promise<void>;
  exited: Promise<number | null>;
  /** The tail of its log (JSON lines on stderr). */
  output(): string;
}

/** `vcfleet worker sandbox [--concurrency N] ++...`; `slots` undefined leaves the concurrency to the config. */
export function startSandboxProcess(overrides: string[], slots?: number): WorkerProcess {
  const concurrency = slots === undefined ? [] : ['--concurrency', String(slots)];
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/vcfleet.js'), 'worker', 'sandbox', ...concurrency, ...overrides], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', VCFLEET_LOG_JSON: '1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let out = '';
  const ready = deferred();
  child.stderr!.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.includes('sandbox worker started')) ready.resolve();
    if (out.length > 200_000) out = out.slice(-100_000);
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const failed = exited.then((code) => {
    throw new Error(`vcfleet worker sandbox exited (${code}) before it was ready:\n${out.slice(-2000)}`);
  });
  return { child, ready: Promise.race([ready.promise, failed]), exited, output: () => out };
}
