/**
 * What a `docker` sandbox ran into, watched inside its container by a short Python program run as
 * `nobody` (which the sandboxed code cannot signal or trace, from a read-only root filesystem): the
 * container's own cgroup counters (OOM kills; forks refused at the process limit), cgroup v1 or v2,
 * and whether a tmpfs mount given as argument was ever full. Its output is still parsed strictly.
 */

/** Below this many free bytes a tmpfs counts as full (as for a `local` sandbox's disk). */
export const FULL_BELOW_BYTES = 1024 * 1024;

/**
 * Runs for the container's life as `nobody`: every 50 ms it reads the counters and checks the
 * mounts (argv) for being full, and prints a reading when it changed or when a line arrives on its
 * stdin (a request); it exits when its stdin closes. "full" stays true once a mount was seen full.
 */
export const WATCH_SCRIPT = `
import json, os, select, sys
def counter(paths, key):
    for p in paths:
        try:
            with open(p) as f:
                for line in f:
                    k, _, v = line.strip().partition(" ")
                    if k == key:
                        return int(v)
        except (OSError, ValueError):
            pass
    return -1
full, last = False, None
while True:
    ready, _, _ = select.select([sys.stdin], [], [], 0.05)
    asked = False
    if ready:
        if not sys.stdin.readline():
            break
        asked = True
    for m in sys.argv[1:]:
        try:
            st = os.statvfs(m)
            if st.f_bavail * st.f_frsize < ${FULL_BELOW_BYTES} or (st.f_files > 0 and st.f_ffree == 0):
                full = True
        except OSError:
            pass
    now = {
        "oom_kills": counter(["/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"], "oom_kill"),
        "pids_max": counter(["/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events"], "max"),
        "full": full,
    }
    if asked or now != last:
        sys.stdout.write(json.dumps(now) + "\\n")
        sys.stdout.flush()
        last = now
`;

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
