"""The first process of every command of a `local` sandbox when the worker runs as root: it gives the
sandbox an unprivileged host identity and a network namespace of its own, then execs bubblewrap.

Usage: python3 -I -S sandbox-launch.py --uid U --marker M [--bridge PORT AGENT_SOCKET OTHER_SOCKET RECORD_DIR] -- BWRAP [ARG...]

It runs as root on the host, already inside the sandbox's cgroup. It drops its supplementary groups,
makes a new user namespace whose one uid and gid (0) are host uid and gid U (a helper it forks first
writes the maps: only a process of the parent namespace may map another uid), becomes that 0 and
execs BWRAP, which makes the sandbox's own namespaces inside it. So nothing the sandbox runs is ever
host root: root-only files of the host, /proc/sys among them, stay out of its reach whatever bwrap
binds, and the uid the kernel charges is U.

--bridge: the sandbox reaches the policy gateway at 127.0.0.1:PORT of a network namespace made here
(bwrap --share-net keeps it). The helper stays root in the host's namespaces, joins that network
namespace and serves the port. For each connection it finds the process that made it (the client's
socket in /proc/net/tcp, then that socket among the descriptors of the sandbox's processes) and
forwards it to AGENT_SOCKET when that process alone holds it and is the sandbox's command (pid 2 of
the sandbox's PID namespace: OpenCode), else to OTHER_SOCKET. The sandbox cannot see, signal or
replace the helper (another PID namespace, another uid), so which calls are the agent's own is a
fact the sandbox cannot forge. The helper dies with the sandbox: it watches bwrap's pidfd and exits
as soon as bwrap has (PR_SET_PDEATHSIG would not do: the kernel sends it with the dying parent's
credentials, which may not signal a root process), and the cgroup kill at teardown. It records itself as RECORD_DIR/<launcher pid>.bridge.json (pid,
start time, boot id, host), so that the worker can wait for it to be gone, and a later worker kill it.
The bridge itself (telling the connections apart, forwarding them) is sandbox-bridge.py beside this
script, loaded by its path.

Failures before BWRAP runs print "M <what failed>" on stderr and exit 125, which the worker reports
as an infrastructure error.
"""
import ctypes
import fcntl
import os
import socket
import struct
import sys
import types

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1

libc = ctypes.CDLL(None, use_errno=True)


def load_script(relative, **given):
    """A module by its path relative to this script's folder (-I leaves that folder off sys.path), from
    its source alone: no bytecode cache is read or written beside it. `given`: names it is handed."""
    path = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), relative))
    module = types.ModuleType(os.path.basename(path).replace("-", "_").removesuffix(".py"))
    module.__file__ = path
    module.__dict__.update(given)
    with open(path, encoding="utf-8") as f:
        exec(compile(f.read(), path, "exec"), module.__dict__)
    return module


# The gateway bridge the helper serves (which process made each connection, and where it goes),
# with the entry script's byte pump (loading the entry runs nothing: its main is behind __name__ == "__main__").
BRIDGE = load_script("sandbox-bridge.py", pump=load_script("../box/sandbox-entry.py").pump)


class LaunchError(Exception):
    pass


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise LaunchError("%s: %s" % (what, os.strerror(err)))


def parse(argv):
    opts = {"uid": None, "marker": "sandbox-launch:", "bridge": None}
    i = 1
    while i < len(argv) and argv[i] != "--":
        if argv[i] == "--uid":
            opts["uid"], i = int(argv[i + 1]), i + 2
        elif argv[i] == "--marker":
            opts["marker"], i = argv[i + 1], i + 2
        elif argv[i] == "--bridge":
            opts["bridge"], i = (int(argv[i + 1]), argv[i + 2], argv[i + 3], argv[i + 4]), i + 5
        else:
            raise ValueError("unknown option %s" % argv[i])
    if opts["uid"] is None or opts["uid"] <= 0:
        raise ValueError("--uid must name a host uid other than 0")
    if i >= len(argv) - 1:
        raise ValueError("no command after --")
    if not argv[i + 1].startswith("/"):
        raise ValueError("the command after -- must be an absolute path")
    return opts, argv[i + 1:]


# --- The helper: maps, then (with --bridge) the gateway bridge --------------------------------------


def write_maps(pid, uid):
    with open("/proc/%d/uid_map" % pid, "w") as f:
        f.write("0 %d 1\n" % uid)
    with open("/proc/%d/setgroups" % pid, "w") as f:
        f.write("deny")
    with open("/proc/%d/gid_map" % pid, "w") as f:
        f.write("0 %d 1\n" % uid)


def record(folder, parent):
    """RECORD_DIR/<parent>.bridge.json: this process, as the worker identifies processes (proc-tree.ts)."""
    with open("/proc/self/stat") as f:
        start = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    ident = '{"pid": %d, "startTime": %d, "bootId": "%s", "hostname": "%s"}' % (os.getpid(), start, boot, socket.gethostname())
    path = os.path.join(folder, "%d.bridge.json" % parent)
    with open(path + ".tmp", "w") as f:
        f.write(ident)
    os.rename(path + ".tmp", path)


def helper(opts, parent, from_parent, to_parent):
    try:
        # Opened at once, so that a parent that dies from here on is seen.
        parent_fd = os.pidfd_open(parent)
        if from_parent.recv(1) != b"u":
            os._exit(0)
        write_maps(parent, opts["uid"])
        to_parent.sendall(b"m")
        if not opts["bridge"]:
            os._exit(0)
        # The parent sends its network namespace itself: opening /proc/<parent>/ns/net would need
        # CAP_SYS_PTRACE now that the parent is another uid (a container's root does not have it).
        msg, fds, _flags, _addr = socket.recv_fds(from_parent, 1, 1)
        if msg != b"n" or len(fds) != 1:
            os._exit(0)
        fd = fds[0]
        check(libc.setns(fd, CLONE_NEWNET), "join the sandbox's network namespace")
        os.close(fd)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", opts["bridge"][0]))
        listener.listen(128)
        record(opts["bridge"][3], parent)
        try:
            # The sandbox may run its memory to the limit: the OOM killer takes its processes first.
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("-1000")
        except OSError:
            pass
        to_parent.sendall(b"r")
        # Nothing of the command's stdio or descriptors stays open here.
        devnull = os.open(os.devnull, os.O_RDWR)
        for n in (0, 1, 2):
            os.dup2(devnull, n)
        keep = {listener.fileno(), parent_fd, 0, 1, 2}
        to_parent.close()
        for n in range(3, 1024):
            if n not in keep:
                try:
                    os.close(n)
                except OSError:
                    pass
        BRIDGE.serve_until_gone(listener, opts["bridge"], parent, parent_fd)
    except BaseException as err:  # noqa: BLE001 - tell the parent, whatever it was
        try:
            to_parent.sendall(b"E" + str(err).encode()[:500])
        except OSError:
            pass
    os._exit(1)


# --- The launcher itself -----------------------------------------------------------------------------


def expect(from_helper, want, what):
    got = from_helper.recv(1)
    if got == want:
        return
    rest = from_helper.recv(600).decode(errors="replace") if got == b"E" else ""
    raise LaunchError("%s: %s" % (what, rest or "the helper ended"))


def loopback_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, ifr)[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))
    finally:
        s.close()


def launch(opts, command):
    os.setgroups([])
    # One socket pair each way of talking (a socket, so that a descriptor can be passed).
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        mine.close()
        helper(opts, parent, theirs, theirs)
    theirs.close()
    check(libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    mine.sendall(b"u")
    expect(mine, b"m", "map uid %d" % opts["uid"])
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    if not opts["bridge"]:
        os.waitpid(child, 0)
    else:
        check(libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
        loopback_up()
        net = os.open("/proc/self/ns/net", os.O_RDONLY)
        socket.send_fds(mine, [b"n"], [net])
        os.close(net)
        expect(mine, b"r", "start the gateway bridge on port %d" % opts["bridge"][0])
    mine.close()
    # An absolute path: execvp's PATH search imports modules that -I -S may not find.
    os.execv(command[0], command)


def main(argv):
    marker = "sandbox-launch:"
    try:
        opts, command = parse(argv)
        marker = opts["marker"]
        launch(opts, command)
    except (ValueError, IndexError, LaunchError, OSError) as err:
        sys.stderr.write("%s %s\n" % (marker, err))
        return 125
    return 125


if __name__ == "__main__":
    sys.exit(main(sys.argv))
