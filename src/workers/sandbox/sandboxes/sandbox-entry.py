"""TCP -> Unix socket bridge run inside a `local` sandbox, in front of the sandboxed command.

Usage: python3 -I -S bridge.py PORT SOCKET_PATH -- COMMAND [ARG...]

The sandbox has no network but its own loopback. This script listens on 127.0.0.1:PORT, then forks
a detached bridge process that forwards every connection to the Unix socket SOCKET_PATH (the
worker's gateway, bind-mounted into the sandbox), and finally execs COMMAND in its own place, so
the command keeps this pid, stdin, stdout and stderr. The port is listening before the command
starts. The bridge is adopted by the namespace's init and dies with the sandbox's PID namespace
when the command exits or is killed.
"""
import os
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


def main(argv):
    if len(argv) < 5 or argv[3] != "--":
        sys.stderr.write("usage: bridge.py PORT SOCKET_PATH -- COMMAND [ARG...]\n")
        return 2
    port, socket_path, command = int(argv[1]), argv[2], argv[4:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    child = os.fork()
    if child == 0:
        detach_and_serve(listener, socket_path)
    os.waitpid(child, 0)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as err:
        sys.stderr.write("bridge: cannot run %s: %s\n" % (command[0], err))
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
