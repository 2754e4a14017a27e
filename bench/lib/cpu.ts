/**
 * CPU time as the capacity benchmark splits it, read before and after each wave (nothing polled,
 * so measuring costs neither side anything): the whole host's busy time from /proc/stat, and a
 * process's own time (utime + stime) and its waited-for children's (cutime + cstime) from
 * /proc/<pid>/stat. A bare `opencode run` reaches the bench process's children count when it is
 * reaped; a sandbox's does not reach the sandbox-worker's, because bwrap's outer process exits
 * without waiting for its namespace's init (which is reparented), so the fleet's sessions are
 * the host's busy time less the processes the bench knows.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

let ticksPerSecond: number | null = null;

function hz(): number {
  if (ticksPerSecond === null) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

export interface CpuSeconds {
  self: number;
  children: number;
}

/** CPU seconds of `pid` and of its waited-for children; zeros when the process is gone. */
export function cpuSeconds(pid: number): CpuSeconds {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return { self: 0, children: 0 };
  }
  // Fields after the command name (which may hold spaces): state is field 3, utime field 14.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const tick = (i: number) => Number(f[i - 3]) / hz();
  return { self: tick(14) + tick(15), children: tick(16) + tick(17) };
}

/** CPU seconds the whole host has been busy (every CPU: user, nice, system, irq, softirq, steal). */
export function hostBusySeconds(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return (user + nice + system + irq + softirq + (steal || 0)) / hz();
}

/** b − a, field by field. */
export function cpuDelta(a: CpuSeconds, b: CpuSeconds): CpuSeconds {
  return { self: b.self - a.self, children: b.children - a.children };
}

/** Whether `pid` has no child processes left (every session reaped). */
export function childless(pid: number): boolean {
  try {
    const tids = readdirSync(`/proc/${pid}/task`);
    return tids.every((tid) => readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim() === '');
  } catch {
    return true;
  }
}
