"""The gateway bridge of sandbox-launch.py (loaded by it from this folder, by path): served by the
launcher's root helper inside the sandbox's network namespace, on 127.0.0.1:PORT. For each connection
it finds the process that made it (the client's socket in /proc/net/tcp, then that socket among the
descriptors of the sandbox's processes) and forwards it to AGENT_SOCKET when that process alone holds
it and is the sandbox's command (pid 2 of the sandbox's PID namespace: OpenCode), else to
OTHER_SOCKET. The sandbox cannot see, signal or replace the helper, so which calls are the agent's
own is a fact the sandbox cannot forge.
"""
import os
import select
import socket
import struct
import threading

# Connections served at once; more are closed at once (a sandbox cannot exhaust the helper's threads).
MAX_CONNECTIONS = 64


def hex_address(ip, port):
    return "%08X:%04X" % (struct.unpack("<I", socket.inet_aton(ip))[0], port)


def socket_inode(peer, port):
    """The inode of the client's end of a connection to 127.0.0.1:port (this network namespace)."""
    local, remote = hex_address(peer[0], peer[1]), hex_address("127.0.0.1", port)
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[1] == local and fields[2] == remote:
                return fields[9]
    return None


def descendants(root, skip):
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        try:
            tasks = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tasks:
            try:
                with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            for kid in kids:
                if kid != skip and kid not in found:
                    found.append(kid)
                    stack.append(kid)
    return found


def holds(pid, target):
    try:
        names = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return False
    for name in names:
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, name)) == target:
                return True
        except OSError:
            continue
    return False


def namespace_pid(pid):
    """The pid of `pid` in its innermost PID namespace, and how deep that namespace is."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("NSpid:"):
                    ids = line.split()[1:]
                    return int(ids[-1]), len(ids)
    except OSError:
        pass
    return None, 0


def made_by_command(peer, port, root):
    """Whether the sandbox's command (ns pid 2) alone holds the client's socket of this connection."""
    inode = socket_inode(peer, port)
    if inode is None:
        return False
    target = "socket:[%s]" % inode
    owners = [pid for pid in descendants(root, os.getpid()) if holds(pid, target)]
    if len(owners) != 1:
        return False
    ns_pid, depth = namespace_pid(owners[0])
    return ns_pid == 2 and depth >= 2


# pump(src, dst): copy bytes until EOF, then half-close dst. It is the entry script's own
# (box/sandbox-entry.py, which bridges the other sandboxes' gateway), given to this module by
# sandbox-launch.py when it loads it: one copy for both bridges.


def handle(client, peer, bridge, root, slots):
    port, agent_socket, other_socket = bridge[:3]
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        target = agent_socket if made_by_command(peer, port, root) else other_socket
        upstream.connect(target)
        back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
        back.start()
        pump(client, upstream)
        back.join()
    except OSError:
        pass
    finally:
        client.close()
        upstream.close()
        slots.release()


def serve(listener, bridge, root):
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
    while True:
        try:
            client, peer = listener.accept()
        except OSError:
            continue
        if not slots.acquire(blocking=False):
            client.close()
            continue
        threading.Thread(target=handle, args=(client, peer, bridge, root, slots), daemon=True).start()


def serve_until_gone(listener, bridge, root, parent_fd):
    """Serve in a thread until bwrap (the parent) has exited: its pidfd becomes readable then."""
    threading.Thread(target=serve, args=(listener, bridge, root), daemon=True).start()
    select.select([parent_fd], [], [])
    os._exit(0)
