/**
 * What a `docker` sandbox ran into, watched inside its container by a short Python program
 * (limit-watcher.py) run as `nobody` (which the sandboxed code cannot signal or trace, from a
 * read-only root filesystem): the container's own cgroup counters (OOM kills; forks refused at the
 * process limit), cgroup v1 or v2, and whether a tmpfs mount given as argument was ever full. Its
 * output is still parsed strictly.
 */
import { readFileSync } from 'node:fs';

/** Below this many free bytes a tmpfs counts as full (as for a `local` sandbox's disk). */
export const FULL_BELOW_BYTES = 1024 * 1024;

/** The watcher's program (limit-watcher.py), run with `python3 -I -S -c` so nothing is written into the container. */
export const WATCH_SCRIPT = readFileSync(new URL('./limit-watcher.py', import.meta.url), 'utf8');

/** The watcher's arguments: the free bytes under which a mount is full, then the mounts it checks. */
export function watchArgs(mounts: readonly string[]): string[] {
  return [String(FULL_BELOW_BYTES), ...mounts];
}

export interface LimitReading {
  /** -1: the counter is not readable in this container. */
  oomKills: number;
  pidsMax: number;
  diskFull: boolean;
}

const count = (v: unknown): number => (typeof v === 'number' && Number.isSafeInteger(v) && v >= -1 ? v : -1);

/** One line of the watcher; anything else is an error. */
export function parseLimitReading(line: string): LimitReading {
  if (line.length > 4096) throw new Error('the limit watcher printed too much');
  const v = JSON.parse(line) as { oom_kills?: unknown; pids_max?: unknown; full?: unknown };
  if (!v || typeof v !== 'object' || typeof v.full !== 'boolean') throw new Error('the limit watcher printed no reading');
  return { oomKills: count(v.oom_kills), pidsMax: count(v.pids_max), diskFull: v.full };
}
