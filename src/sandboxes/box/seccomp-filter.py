"""The seccomp filter of a `local` sandbox, built with libseccomp (Debian's python3-seccomp).

Usage: /usr/bin/python3 seccomp-filter.py bpf                 -> the BPF program on stdout (bwrap --seccomp)
       /usr/bin/python3 seccomp-filter.py numbers NAME...     -> {"NAME": number} for this machine, as JSON
       /usr/bin/python3 seccomp-filter.py docker-profile      -> the worker container's profile, as JSON
       /usr/bin/python3 seccomp-filter.py docker-sandbox-profile -> the same filter as a Docker profile
                                                                 (`docker` sandboxes), as JSON

Everything is allowed except the calls below, which fail with EPERM (clone3 with ENOSYS, so that
libc falls back to clone, whose namespace flags are refused). The list follows what Docker's default
profile refuses to an unprivileged container: other processes' memory (ptrace, process_vm_*,
pidfd_getfd, kcmp), kernel attack surface with a history of exploits (bpf, perf_event_open,
io_uring, keyrings, userfaultfd), mounts and namespaces, the kernel itself (modules, kexec, reboot,
swap, accounting, quotas, clocks), file handles, raw I/O ports, NUMA moves of other processes,
vsock sockets (not isolated by a network namespace) and personality flags that turn off ASLR.
Syscall numbers come from libseccomp, never typed by hand. Syscalls this architecture lacks are skipped.
"""
import errno
import json
import os
import socket
import sys

DENY_EPERM = [
    # Other processes: memory and file descriptors.
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "process_madvise",
    # Kernel attack surface.
    "bpf", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key", "userfaultfd", "fanotify_init", "lookup_dcookie", "syslog",
    # Mounts and namespaces.
    "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount", "fsconfig", "fspick",
    "move_mount", "open_tree", "mount_setattr", "unshare", "setns",
    # The kernel and the machine.
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module",
    "query_module", "get_kernel_syms", "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
    "settimeofday", "stime", "clock_settime", "clock_adjtime", "vhangup", "sethostname", "setdomainname",
    "iopl", "ioperm", "nfsservctl", "uselib", "ustat", "sysfs", "_sysctl", "vm86", "vm86old",
    # File handles bypass path permissions.
    "name_to_handle_at", "open_by_handle_at",
    # NUMA placement (moves other processes' pages).
    "move_pages", "migrate_pages", "mbind", "get_mempolicy", "set_mempolicy", "set_mempolicy_home_node",
]
DENY_ENOSYS = ["clone3"]

# <linux/sched.h> namespace flags of clone(); Python 3.12+ names them in `os`, 3.11 does not.
CLONE_NS_FLAGS = {
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
# <linux/personality.h> flags that weaken the address space (ASLR off, executable data, page 0).
# The query form personality(0xffffffff) carries every bit, so it is refused too.
PERSONALITY_DENIED = {
    "ADDR_NO_RANDOMIZE": 0x0040000, "FDPIC_FUNCPTRS": 0x0080000, "MMAP_PAGE_ZERO": 0x0100000,
    "ADDR_COMPAT_LAYOUT": 0x0200000, "READ_IMPLIES_EXEC": 0x0400000, "ADDR_LIMIT_32BIT": 0x0800000,
    "SHORT_INODE": 0x1000000, "WHOLE_SECONDS": 0x2000000, "STICKY_TIMEOUTS": 0x4000000,
    "ADDR_LIMIT_3GB": 0x8000000,
}

# What bubblewrap itself needs in the sandbox-worker's container: those stay allowed there
# (sethostname: `--hostname sandbox` names the sandbox's own UTS namespace).
BWRAP_NEEDS = {"mount", "umount", "umount2", "pivot_root", "unshare", "setns", "clone3", "chroot", "sethostname"}


def clone_flag(name):
    return getattr(os, name, CLONE_NS_FLAGS[name])


def build_filter():
    import seccomp

    def known(name):
        return seccomp.resolve_syscall(seccomp.Arch.NATIVE, name) >= 0

    f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    # Another ABI (i386 via int 0x80, x32) would bypass every rule: refuse all of its calls.
    f.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.ERRNO(errno.ENOSYS))
    for name in filter(known, DENY_EPERM):
        f.add_rule(seccomp.ERRNO(errno.EPERM), name)
    for name in filter(known, DENY_ENOSYS):
        f.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
    # One rule per flag: libseccomp takes one comparison per argument and rule; rules are OR'ed.
    for name in CLONE_NS_FLAGS:
        flag = clone_flag(name)
        f.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    for flag in PERSONALITY_DENIED.values():
        f.add_rule(seccomp.ERRNO(errno.EPERM), "personality", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    f.add_rule(seccomp.ERRNO(errno.EPERM), "socket", seccomp.Arg(0, seccomp.EQ, socket.AF_VSOCK))
    return f


def numbers(names):
    import seccomp

    return {n: seccomp.resolve_syscall(seccomp.Arch.NATIVE, n) for n in names}


def docker_profile():
    """Docker's profile format: allow by default, refuse the list minus what bwrap needs."""
    denied = sorted(set(DENY_EPERM) - BWRAP_NEEDS)
    return {
        "comment": "generated by src/sandboxes/box/seccomp-filter.py docker-profile; do not edit",
        "defaultAction": "SCMP_ACT_ALLOW",
        "archMap": [
            {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
            {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
        ],
        "syscalls": [{"names": denied, "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM}],
    }


def docker_sandbox_profile():
    """The `local` filter in Docker's format, for `docker` sandboxes: the whole list refused (nothing
    of bwrap's is needed there), clone's namespace flags, the personality flags and vsock sockets too."""
    arches = docker_profile()["archMap"]
    masked = lambda index, flag: {"index": index, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}
    eperm = {"action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM}
    rules = [dict(names=sorted(DENY_EPERM), **eperm), {"names": DENY_ENOSYS, "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS}]
    rules += [dict(names=["clone"], args=[masked(0, clone_flag(n))], **eperm) for n in CLONE_NS_FLAGS]
    rules += [dict(names=["personality"], args=[masked(0, f)], **eperm) for f in PERSONALITY_DENIED.values()]
    rules.append(dict(names=["socket"], args=[{"index": 0, "value": socket.AF_VSOCK, "valueTwo": 0, "op": "SCMP_CMP_EQ"}], **eperm))
    return {
        "comment": "generated by src/sandboxes/box/seccomp-filter.py docker-sandbox-profile; do not edit",
        "defaultAction": "SCMP_ACT_ALLOW",
        "archMap": arches,
        "syscalls": rules,
    }


def main(argv):
    mode = argv[1] if len(argv) > 1 else "bpf"
    if mode == "bpf":
        build_filter().export_bpf(sys.stdout)
    elif mode == "numbers":
        print(json.dumps(numbers(argv[2:])))
    elif mode == "docker-profile":
        print(json.dumps(docker_profile(), indent=2))
    elif mode == "docker-sandbox-profile":
        print(json.dumps(docker_sandbox_profile(), indent=2))
    else:
        sys.stderr.write("usage: seccomp-filter.py bpf | numbers NAME... | docker-profile | docker-sandbox-profile\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
