/** The host's processes, read from /proc, for tests that check nothing outlived a sandbox or a worker. */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

/** What a spawned child (stdout and stderr piped) has printed, and its exit code once it exits. */
export interface CapturedOutput {
  /** stdout and stderr together, in arrival order. */
  output(): string;
  stdout(): string;
  exited: Promise<number | null>;
}

/** Collects a child's stdout and stderr from now on. */
export function captured(child: ChildProcess): CapturedOutput {
  let out = '';
  let stdout = '';
  child.stdout!.on('data', (d) => {
    out += d;
    stdout += d;
  });
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { output: () => out, stdout: () => stdout, exited };
}

/** Processes (but this one) whose command line contains `marker`, as `{pid, cmd}`. */
export function processesMatching(marker: string): Array<{ pid: number; cmd: string }> {
  const found: Array<{ pid: number; cmd: string }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmd.includes(marker)) found.push({ pid: Number(entry), cmd });
    } catch {
      // exited meanwhile
    }
  }
  return found;
}

/** The pids of the processes whose command line contains `marker`. */
export function processesWith(marker: string): number[] {
  return processesMatching(marker).map((p) => p.pid);
}
