"""What a `docker` sandbox ran into, watched inside its container (docker/limits.ts reads its output).

Run as `nobody` for the container's life: python3 -I -S -c <this file> FULL_BELOW_BYTES MOUNT...
Every 50 ms it reads the container's own cgroup counters (OOM kills; forks refused at the process
limit; cgroup v1 or v2) and checks the tmpfs mounts for being full (fewer than FULL_BELOW_BYTES free
bytes, or no free inode), and prints a JSON reading when it changed or when a line arrives on its
stdin (a request); it exits when its stdin closes. "full" stays true once a mount was seen full.
"""
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


full_below, mounts = int(sys.argv[1]), sys.argv[2:]
full, last = False, None
while True:
    ready, _, _ = select.select([sys.stdin], [], [], 0.05)
    asked = False
    if ready:
        if not sys.stdin.readline():
            break
        asked = True
    for m in mounts:
        try:
            st = os.statvfs(m)
            if st.f_bavail * st.f_frsize < full_below or (st.f_files > 0 and st.f_ffree == 0):
                full = True
        except OSError:
            pass
    now = {
        "oom_kills": counter(["/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"], "oom_kill"),
        "pids_max": counter(["/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events"], "max"),
        "full": full,
    }
    if asked or now != last:
        sys.stdout.write(json.dumps(now) + "\n")
        sys.stdout.flush()
        last = now
