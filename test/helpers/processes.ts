/** The host's processes, read from /proc, for tests that check nothing outlived a sandbox or a worker. */
import { readFileSync, readdirSync } from 'node:fs';

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
