/**
 * The bubblewrap policy of a `local` sandbox, as a bwrap argument list.
 *
 * The sandbox root is an empty tmpfs, remounted read-only, holding only: the system (`/usr` and the
 * merged-/usr links), an allowlist of `/etc` entries (no shadow files, no ssh keys, no service
 * configs), `--proc` with the host's kernel command line and kernel internals masked and the kernel's
 * settings read-only (`/proc/sys`, `/proc/sysrq-trigger`, `/proc/irq`, `/proc/bus`, `/proc/fs`, as
 * Docker keeps them; this holds in every mode, on top of the unprivileged host uid), `--dev`
 * remounted read-only (so it cannot be used as storage) with `/dev/shm` from the sandbox disk, the
 * task's workspace and tmp folders read-write, the caller's extra read-only binds, the entry script
 * and the gateway socket. The worker's home, the project checkout, `/run`, `/var`, `/opt`, `/home`,
 * `/mnt` and everything else on the host are simply not there. Every namespace is new (pid, net with
 * only `lo`, ipc, uts, cgroup, user with no capabilities and no nested user namespaces), the tree
 * dies with the worker (`--die-with-parent`), and a seccomp filter (seccomp-filter.py) may narrow
 * the system calls.
 *
 * `/proc/meminfo` stays: tools size their buffers and thread pools from it, and it only shows the
 * host's totals, not what runs there. Host processes are hidden by the PID namespace already.
 */
import { existsSync, lstatSync, readlinkSync } from 'node:fs';

/** Where the gateway's Unix socket appears inside the sandbox. */
export const GATEWAY_SOCKET_IN_SANDBOX = '/run/vcfleet/gateway.sock';
/** Where the entry script (sandbox-entry.py: limits, gateway bridge, exec) appears inside the sandbox. */
export const ENTRY_IN_SANDBOX = '/run/vcfleet/entry.py';
/** The interpreter that runs the entry script inside the sandbox (Debian's, with the image libraries). */
export const SANDBOX_PYTHON = '/usr/bin/python3';

/** `/proc` files and folders that show the host (boot line, kernel memory and symbols, keys, timers). */
const PROC_MASKED_FILES = [
  'cmdline', 'kcore', 'kallsyms', 'modules', 'keys', 'key-users', 'latency_stats', 'timer_list', 'timer_stats',
  'sched_debug', 'config.gz',
];
const PROC_MASKED_DIRS = ['acpi', 'asound', 'scsi', 'driver'];
/** `/proc` entries that change the host's kernel: visible, never writable. */
export const PROC_READ_ONLY = ['sys', 'sysrq-trigger', 'irq', 'bus', 'fs'];

/** Top-level system paths: a symlink on merged-/usr systems, a folder elsewhere. */
const SYSTEM_PATHS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * `/etc` entries a shell, Python with its imaging libraries, and OpenCode need. Everything else in
 * `/etc` (shadow files, ssh host keys, sudoers, database and broker configs, npmrc, pip.conf,
 * gitconfig, environment) stays hidden.
 */
const ETC_ALLOWLIST = [
  'passwd', 'group', 'nsswitch.conf', 'hosts', 'host.conf', 'gai.conf', 'resolv.conf',
  'localtime', 'timezone', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'alternatives',
  'ssl/certs', 'ssl/openssl.cnf', 'ca-certificates', 'ca-certificates.conf', 'fonts', 'mime.types',
  'magic', 'magic.mime', 'mailcap', 'python3', 'python3.11', 'python3.12', 'python3.13', 'protocols',
  'services', 'os-release', 'debian_version', 'lsb-release', 'inputrc', 'locale.alias', 'terminfo',
  'bash.bashrc', 'profile', 'shells', 'ImageMagick-6', 'matplotlibrc',
];

export interface BwrapPolicy {
  /** Host folder bound read-write at `workdir`. */
  workspaceHostDir: string;
  /** Host folder bound read-write at `/tmp`. */
  tmpHostDir: string;
  /** Host folder bound read-write at `/dev/shm`; without it `/dev/shm` is read-only like the rest of `/dev`. */
  shmHostDir?: string;
  /** An empty host file and an empty host folder, bound read-only over the masked `/proc` entries. */
  emptyFile: string;
  emptyDir: string;
  /** Absolute path of the work folder inside the sandbox (`sandbox_workdir`). */
  workdir: string;
  /** Working directory of the command inside the sandbox. */
  cwd: string;
  /** Host paths visible read-only at the same path. */
  extraRoBinds: readonly string[];
  /** Host Unix socket of the task's gateway, bound at GATEWAY_SOCKET_IN_SANDBOX (when no bridge outside serves it). */
  gatewaySocket?: string;
  /** Keep the network namespace bwrap is started in (the launcher made it, with the gateway bridge in it). */
  shareNet?: boolean;
  /** Host path of sandbox-entry.py, bound at ENTRY_IN_SANDBOX. */
  entryScript?: string;
  /** A file descriptor of the bwrap process from which it reads the seccomp BPF program. */
  seccompFd?: number;
}

const NAMESPACE_ARGS = [
  '--unshare-all', '--unshare-user', '--disable-userns', '--cap-drop', 'ALL',
  '--die-with-parent', '--new-session', '--hostname', 'sandbox',
];

/** The namespace flags alone, for the provider's startup probe. */
export function namespaceArgs(): string[] {
  return [...NAMESPACE_ARGS];
}

function systemArgs(): string[] {
  const args = ['--ro-bind', '/usr', '/usr'];
  for (const p of SYSTEM_PATHS) {
    if (!existsSync(p)) continue;
    const st = lstatSync(p);
    if (st.isSymbolicLink()) args.push('--symlink', readlinkSync(p), p);
    else args.push('--ro-bind', p, p);
  }
  for (const name of ETC_ALLOWLIST) {
    const p = `/etc/${name}`;
    // A dangling link (e.g. resolv.conf into /run) is skipped rather than failing the sandbox.
    if (existsSync(p)) args.push('--ro-bind', p, p);
  }
  return args;
}

function procArgs(emptyFile: string, emptyDir: string): string[] {
  const args = ['--proc', '/proc'];
  // Only what this kernel has: a bind needs an existing mount point.
  for (const f of PROC_MASKED_FILES) if (existsSync(`/proc/${f}`)) args.push('--ro-bind', emptyFile, `/proc/${f}`);
  for (const d of PROC_MASKED_DIRS) if (existsSync(`/proc/${d}`)) args.push('--ro-bind', emptyDir, `/proc/${d}`);
  for (const p of PROC_READ_ONLY) if (existsSync(`/proc/${p}`)) args.push('--ro-bind', `/proc/${p}`, `/proc/${p}`);
  return args;
}

/** Builds every bwrap option (the command follows after `--`). */
export function buildBwrapArgs(policy: BwrapPolicy): string[] {
  const args = [...NAMESPACE_ARGS, ...(policy.shareNet ? ['--share-net'] : []), ...systemArgs(), ...procArgs(policy.emptyFile, policy.emptyDir), '--dev', '/dev'];
  if (policy.shmHostDir) args.push('--bind', policy.shmHostDir, '/dev/shm');
  // Not recursive: /dev/shm, /dev/pts and the device nodes keep their own mounts.
  args.push('--remount-ro', '/dev');
  args.push('--bind', policy.workspaceHostDir, policy.workdir, '--bind', policy.tmpHostDir, '/tmp');
  for (const p of policy.extraRoBinds) args.push('--ro-bind', p, p);
  if (policy.gatewaySocket) args.push('--bind', policy.gatewaySocket, GATEWAY_SOCKET_IN_SANDBOX);
  if (policy.entryScript) args.push('--ro-bind', policy.entryScript, ENTRY_IN_SANDBOX);
  args.push('--remount-ro', '/', '--chdir', policy.cwd);
  if (policy.seccompFd !== undefined) args.push('--seccomp', String(policy.seccompFd));
  return args;
}

/** What the entry script does before it execs the command. */
export interface EntryOptions {
  /** RLIMIT_FSIZE in bytes and RLIMIT_NOFILE. */
  rlimits?: { fsizeBytes: number; nofile: number };
  /** Serve the gateway socket on 127.0.0.1:<port>. */
  gatewayPort?: number;
}

/** The command line run inside bwrap: the argv itself, or the entry script which then execs it. */
export function sandboxCommand(argv: readonly string[], entry: EntryOptions = {}): string[] {
  if (!entry.rlimits && entry.gatewayPort === undefined) return [...argv];
  const opts: string[] = [];
  if (entry.rlimits) opts.push('--fsize', String(entry.rlimits.fsizeBytes), '--nofile', String(entry.rlimits.nofile));
  if (entry.gatewayPort !== undefined) opts.push('--gateway', String(entry.gatewayPort), GATEWAY_SOCKET_IN_SANDBOX);
  return [SANDBOX_PYTHON, '-I', '-S', ENTRY_IN_SANDBOX, ...opts, '--', ...argv];
}
