"""Memory pressure of one cgroup v1 memory cgroup, as the kernel reports it (memory.pressure_level).

Usage: python3 -I -S memory-pressure.py FOLDER

Registers an eventfd for the `medium` and the `critical` level of FOLDER's memory.pressure_level in
`local` mode (only reclaim of this cgroup itself counts: a child cgroup, a sandbox, reclaiming within
its own limit does not), prints `ready`, then one line per event (`medium` or `critical`). cgroup v2
has per-cgroup PSI files instead; v1 has only this. Ends with its parent (PR_SET_PDEATHSIG) or when
its stdin closes.
"""
import ctypes
import os
import select
import sys

PR_SET_PDEATHSIG = 1
SIGKILL = 9


def main(argv):
    folder = argv[1]
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
    level_fd = os.open(os.path.join(folder, "memory.pressure_level"), os.O_RDONLY)
    levels = {}
    for level in ("medium", "critical"):
        efd = os.eventfd(0, os.EFD_CLOEXEC)
        with open(os.path.join(folder, "cgroup.event_control"), "w") as control:
            control.write("%d %d %s,local" % (efd, level_fd, level))
        levels[efd] = level
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    watched = list(levels) + [0]
    while True:
        ready, _, _ = select.select(watched, [], [])
        for fd in ready:
            if fd == 0:
                if not os.read(0, 4096):
                    return 0
                continue
            os.eventfd_read(fd)
            sys.stdout.write(levels[fd] + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (OSError, IndexError) as err:
        sys.stderr.write("memory-pressure: %s\n" % err)
        sys.exit(1)
