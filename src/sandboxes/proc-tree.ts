/**
 * Small `/proc` helpers for the `local` provider: identify a process by pid + start time (so a reused
 * pid is never mistaken for ours), find the processes of a bubblewrap PID namespace, and signal them.
 * Linux only.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import os from 'node:os';

/** Who owns a sandbox folder or a running exec: enough to tell later whether it is still alive. */
export interface ProcessIdentity {
  pid: number;
  /** Field 22 of `/proc/<pid>/stat` (clock ticks since boot). */
  startTime: number;
  /** `/proc/sys/kernel/random/boot_id`: a start time is only meaningful within one boot. */
  bootId: string;
  hostname: string;
}

/** Start time of a process, or null when it does not exist (or is a zombie being reaped). */
export function processStartTime(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: parse after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z') return null;
    return Number(fields[19]);
  } catch {
    return null;
  }
}

export function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return 'unknown';
  }
}

export function identityOf(pid: number): ProcessIdentity | null {
  const startTime = processStartTime(pid);
  if (startTime === null) return null;
  return { pid, startTime, bootId: bootId(), hostname: os.hostname() };
}

/** Whether the process recorded in `id` still runs (same boot, same pid, same start time). */
export function isAlive(id: ProcessIdentity): boolean {
  if (id.bootId !== bootId()) return false;
  return processStartTime(id.pid) === id.startTime;
}

function childrenOf(pid: number): number[] {
  try {
    const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return text ? text.split(/\s+/).map(Number) : [];
  } catch {
    return [];
  }
}

function pidNamespaceOf(pid: number): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return null;
  }
}

/**
 * The host pids of every process in the PID namespace that the bubblewrap process `bwrapPid`
 * created, except its init (which ignores signals it has no handler for). Empty when it is gone.
 * (A launcher's gateway bridge is another child of bwrap, in the host's PID namespace: not counted.)
 */
export function namespaceMembers(bwrapPid: number): number[] {
  const own = pidNamespaceOf(process.pid);
  const init = childrenOf(bwrapPid).find((pid) => {
    const ns = pidNamespaceOf(pid);
    return ns !== null && ns !== own;
  });
  if (init === undefined) return [];
  const ns = pidNamespaceOf(init);
  if (ns === null) return [];
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === init) continue;
    if (pidNamespaceOf(pid) === ns) members.push(pid);
  }
  return members;
}

/** Send a signal, ignoring processes that are already gone. */
export function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // ESRCH: already exited.
  }
}
