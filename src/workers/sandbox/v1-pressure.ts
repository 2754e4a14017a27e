/**
 * The worker's own memory pressure on a cgroup v1 host, where there is no per-cgroup PSI file: the
 * kernel's reclaim-pressure events of the worker's memory cgroup (memory-pressure.py, `local` mode,
 * so a sandbox reclaiming within its own limit does not count), turned into a share of the last 10 s
 * that had a `medium` or `critical` event, comparable with PSI's `some avg10`. The host-wide PSI file
 * would count every sandbox's own thrashing, and one sandbox would then stop the worker taking rollouts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../../shared/logger.ts';

const SCRIPT = fileURLToPath(new URL('./memory-pressure.py', import.meta.url));
const WINDOW_S = 10;

export interface PressureWatch {
  /** The share of the last 10 s (in 1-s slots) with reclaim pressure on the cgroup, in %. */
  pct(now?: number): number;
  stop(): void;
}

/** The share of the `windowS` 1-s slots before `now` (ms) that hold an event (ms timestamps), in %. */
export function pressureShare(events: readonly number[], now: number, windowS = WINDOW_S): number {
  const slots = new Set<number>();
  for (const at of events) {
    const age = (now - at) / 1000;
    if (age >= 0 && age < windowS) slots.add(Math.floor(age));
  }
  return (100 * slots.size) / windowS;
}

/**
 * Watch `folder` (a v1 memory cgroup); resolves null, having logged why, when the kernel or the
 * permissions do not allow it (the caller then has no pressure signal, only free memory).
 */
export async function watchV1Pressure(folder: string, logger: Logger, python = '/usr/bin/python3'): Promise<PressureWatch | null> {
  let child: ChildProcess;
  try {
    child = spawn(python, ['-I', '-S', SCRIPT, folder], { stdio: ['pipe', 'pipe', 'pipe'] });
  } catch (err) {
    logger.warn({ err: (err as Error).message }, 'cannot watch the memory pressure of this worker\'s cgroup (v1): admission uses free memory only');
    return null;
  }
  const events: number[] = [];
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
  child.on('error', () => undefined);
  const lines = createInterface({ input: child.stdout! });
  const ready = await new Promise<boolean>((resolve) => {
    lines.on('line', (line) => {
      if (line === 'ready') return resolve(true);
      events.push(Date.now());
      if (events.length > 1000) events.splice(0, events.length - 1000);
    });
    child.once('exit', () => resolve(false));
  });
  if (!ready) {
    logger.warn({ folder, err: stderr.trim() }, 'cannot watch the memory pressure of this worker\'s cgroup (v1): admission uses free memory only');
    return null;
  }
  child.unref();
  (child.stdout as { unref?: () => void }).unref?.();
  (child.stderr as { unref?: () => void }).unref?.();
  (child.stdin as { unref?: () => void }).unref?.();
  return {
    pct: (now = Date.now()) => pressureShare(events, now),
    stop: () => {
      child.stdin?.end();
      child.kill('SIGKILL');
    },
  };
}
