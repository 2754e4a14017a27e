/**
 * The bubblewrap policy of a `local` sandbox, as a bwrap argument list.
 *
 * The sandbox root is an empty tmpfs, remounted read-only, holding only: the system (`/usr` and the
 * merged-/usr links), an allowlist of `/etc` entries (no shadow files, no ssh keys, no service
 * configs), `--proc`, `--dev`, the task's workspace and tmp folders read-write, the caller's extra
 * read-only binds, and the gateway socket. The worker's home, the project checkout, `/run`, `/var`,
 * `/opt`, `/home`, `/mnt` and everything else on the host are simply not there. Every namespace is
 * new (pid, net with only `lo`, ipc, uts, cgroup, user with no capabilities and no nested user
 * namespaces), and the tree dies with the worker (`--die-with-parent`).
 */
import { existsSync, lstatSync, readlinkSync } from 'node:fs';

/** Where the gateway's Unix socket appears inside the sandbox. */
export const GATEWAY_SOCKET_IN_SANDBOX = '/run/vcfleet/gateway.sock';
/** Where the TCP->Unix bridge script appears inside the sandbox. */
export const BRIDGE_IN_SANDBOX = '/run/vcfleet/bridge.py';
/** The interpreter that runs the bridge inside the sandbox (Debian's, with the image libraries). */
export const SANDBOX_PYTHON = '/usr/bin/python3';

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
  /** Absolute path of the work folder inside the sandbox (`sandbox_workdir`). */
  workdir: string;
  /** Working directory of the command inside the sandbox. */
  cwd: string;
  /** Host paths visible read-only at the same path. */
  extraRoBinds: readonly string[];
  /** Host Unix socket of the task's gateway, bound at GATEWAY_SOCKET_IN_SANDBOX. */
  gatewaySocket?: string;
  /** Host path of bridge.py, bound at BRIDGE_IN_SANDBOX (with `gatewaySocket`). */
  bridgeScript?: string;
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

/** Builds every bwrap option (the command follows after `--`). */
export function buildBwrapArgs(policy: BwrapPolicy): string[] {
  const args = [...NAMESPACE_ARGS, ...systemArgs(), '--proc', '/proc', '--dev', '/dev'];
  args.push('--bind', policy.workspaceHostDir, policy.workdir, '--bind', policy.tmpHostDir, '/tmp');
  for (const p of policy.extraRoBinds) args.push('--ro-bind', p, p);
  if (policy.gatewaySocket && policy.bridgeScript) {
    args.push('--bind', policy.gatewaySocket, GATEWAY_SOCKET_IN_SANDBOX);
    args.push('--ro-bind', policy.bridgeScript, BRIDGE_IN_SANDBOX);
  }
  args.push('--remount-ro', '/', '--chdir', policy.cwd);
  return args;
}

/** The command line run inside bwrap: the argv itself, or the bridge which then execs it. */
export function sandboxCommand(argv: readonly string[], gatewayPort?: number): string[] {
  if (gatewayPort === undefined) return [...argv];
  return [SANDBOX_PYTHON, '-I', '-S', BRIDGE_IN_SANDBOX, String(gatewayPort), GATEWAY_SOCKET_IN_SANDBOX, '--', ...argv];
}
