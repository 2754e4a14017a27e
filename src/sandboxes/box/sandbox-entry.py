"""The first process of every command run in a `local` sandbox: sets its limits, optionally starts
the gateway bridge, then execs the command in its own place (same pid, stdin, stdout and stderr).

Usage: python3 -I -S sandbox-entry.py [--fsize BYTES] [--nofile N] [--gateway PORT SOCKET_PATH] -- COMMAND [ARG...]

--fsize and --nofile set RLIMIT_FSIZE (largest file, in bytes) and RLIMIT_NOFILE (open files), soft
and hard, and core dumps are turned off; everything the command starts inherits them. A file write
past the size limit fails with EFBIG (SIGXFSZ is ignored here, and an ignored signal stays ignored
across exec), so it reaches the command as an ordinary error.

--gateway: the sandbox has no network but its own loopback. The entry listens on 127.0.0.1:PORT,
then forks a detached bridge process that forwards every connection to the Unix socket SOCKET_PATH
(the worker's gateway, bind-mounted into the sandbox). The port is listening before the command
starts. The bridge is adopted by the namespace's init and dies with the sandbox's PID namespace
when the command exits or is killed.
"""
import os
import resource
import signal
import socket
import sys
import threading

CHUNK = 65536


def pump(src, dst):
    """Copy bytes from src to dst until EOF, then half-close dst."""
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def handle(client, socket_path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(socket_path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listener, socket_path):
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            continue
        threading.Thread(target=handle, args=(client, socket_path), daemon=True).start()


def detach_and_serve(listener, socket_path):
    """In a grandchild: drop the command's stdio (so its pipes close when it exits), then serve."""
    if os.fork() != 0:
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        serve(listener, socket_path)
    finally:
        os._exit(0)


def set_limits(fsize, nofile):
    if fsize is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if nofile is not None:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        n = nofile if hard == resource.RLIM_INFINITY else min(nofile, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def start_bridge(port, socket_path):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    child = os.fork()
    if child == 0:
        detach_and_serve(listener, socket_path)
    os.waitpid(child, 0)
    listener.close()


def parse(argv):
    opts = {"fsize": None, "nofile": None, "gateway": None}
    i = 1
    while i < len(argv) and argv[i] != "--":
        if argv[i] == "--fsize":
            opts["fsize"], i = int(argv[i + 1]), i + 2
        elif argv[i] == "--nofile":
            opts["nofile"], i = int(argv[i + 1]), i + 2
        elif argv[i] == "--gateway":
            opts["gateway"], i = (int(argv[i + 1]), argv[i + 2]), i + 3
        else:
            raise ValueError("unknown option %s" % argv[i])
    if i >= len(argv) - 1:
        raise ValueError("no command after --")
    return opts, argv[i + 1:]


def main(argv):
    try:
        opts, command = parse(argv)
    except (ValueError, IndexError) as err:
        sys.stderr.write("sandbox-entry: %s\n" % err)
        return 2
    set_limits(opts["fsize"], opts["nofile"])
    if opts["gateway"]:
        start_bridge(*opts["gateway"])
    # Python ignores SIGPIPE for itself; an ignored signal would stay ignored in the command.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    # No descriptor the worker's host process happened to leave inheritable reaches the command.
    os.closerange(3, 1 << 20)
    try:
        os.execvp(command[0], command)
    except OSError as err:
        sys.stderr.write("sandbox-entry: cannot run %s: %s\n" % (command[0], err))
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
