/**
 * Hosts made of Linux namespaces, for a fleet test that spans "machines": a private layer-2 network
 * (a bridge in a network namespace of its own, with no address and no route out) and any number of
 * hosts, each a network namespace with one address on it. A process started on a host runs in that
 * network namespace; started with `private` mounts it also gets a mount and UTS namespace of its own
 * (its host name, a private `/tmp`, HOME and working folder, and the code read-only).
 *
 * Processes enter a host with `nsenter --net`, not `ip netns exec`: the latter remounts /sys for the
 * namespace, which hides /sys/fs/cgroup, so a sandbox-worker would find no cgroup to box its sandboxes.
 *
 *   const lab = createLab(dir);              // throws when namespaces cannot be made
 *   const h = lab.addHost('redis');          // h.ns, h.addr
 *   lab.start(h, ['redis-server', ...]);     // a process in that network namespace
 *   await lab.cleanup();                     // kills every process, deletes every namespace
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, realpathSync, rmdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { WORKER_LEAF } from '../../src/sandboxes/local/cgroup-layout.ts';
import { parseMountinfo } from '../../src/sandboxes/host-cgroups.ts';
import { captured, type CapturedOutput } from '../helpers/processes.ts';
import { descendants, stillAlive, type ProcId } from './fault-helpers.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** Why this machine cannot run the namespace tests, or null when it can. */
export function namespaceSupport(): string | null {
  if (process.getuid?.() !== 0) return 'creating network namespaces needs root';
  const probe = `vcfprobe${randomBytes(3).toString('hex')}`;
  try {
    execFileSync('ip', ['netns', 'add', probe], { stdio: 'pipe' });
  } catch (err) {
    return `ip netns add failed: ${String((err as { stderr?: Buffer }).stderr ?? (err as Error).message).trim()}`;
  }
  try {
    execFileSync('ip', ['netns', 'del', probe], { stdio: 'pipe' });
  } catch {
    // the probe name is unique; nothing else uses it
  }
  return null;
}

export interface LabHost {
  /** A short name (`producer`, `sandbox-1`); also the host name its private processes see. */
  role: string;
  /** The network namespace (`ip netns` name). */
  ns: string;
  addr: string;
  /** This host's own folder on the real disk: `home/` and `work/` are its HOME and working folder. */
  dir: string;
  home: string;
  work: string;
}

export interface LabProcess extends CapturedOutput {
  host: LabHost;
  child: ChildProcess;
}

export interface StartOptions {
  env?: Record<string, string>;
  /** A mount and UTS namespace of its own: host name, private /tmp, HOME=/root, working folder /srv, the code read-only. */
  private?: boolean;
}

/** Where a private host finds its HOME and working folder (bind mounts over these paths). */
export const PRIVATE_HOME = '/root';
export const PRIVATE_WORK = '/srv';

/**
 * Mounts of a private host, then exec: $1 host name, $2 working folder, $3 HOME, then folders to make
 * read-only up to `--`, then the command. The new /tmp is a tmpfs built on /mnt and moved over /tmp
 * last: code that lives under /tmp (a checkout in /tmp, as CI may make) is bound into it first, so
 * hiding the real /tmp hides neither the code nor HOME and the working folder (bound before the move).
 */
const PRIVATE_HOST_SCRIPT = [
  'set -e',
  'hostname "$1"; work=$2; home=$3; shift 3',
  'mount -t tmpfs -o mode=1777,size=4g vcfleet-host-tmp /mnt',
  'while [ "$1" != -- ]; do',
  '  mount --bind "$1" "$1"; mount -o remount,bind,ro "$1"',
  '  case "$1" in /tmp/*) keep="/mnt${1#/tmp}"; mkdir -p "$keep"; mount --bind "$1" "$keep"; mount -o remount,bind,ro "$keep";; esac',
  '  shift',
  'done; shift',
  `mount --bind "$home" ${PRIVATE_HOME}`,
  `mount --bind "$work" ${PRIVATE_WORK}`,
  'mount --move /mnt /tmp',
  `cd ${PRIVATE_WORK}`,
  'exec "$@"',
].join('\n');

/** The folders private hosts see read-only: the repository and its node_modules (which may be a link elsewhere). */
function codeFolders(): string[] {
  const modules = realpathSync(path.join(ROOT, 'node_modules'));
  return modules.startsWith(`${ROOT}/`) ? [ROOT] : [ROOT, modules];
}

export interface Lab {
  /** The unique tag of this lab (in every namespace and interface name). */
  tag: string;
  subnet: string;
  /** The namespace that holds the bridge. */
  switchNs: string;
  hosts: LabHost[];
  processes: LabProcess[];
  addHost(role: string): LabHost;
  start(host: LabHost, argv: string[], options?: StartOptions): LabProcess;
  /** Every process started (and all below them) SIGKILLed, every namespace deleted, idempotent; returns what it could not do. */
  cleanup(): Promise<string[]>;
}

function ip(...args: string[]): string {
  return execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
}

/** The namespace names of this machine (`ip netns list`). */
export function listNamespaces(): string[] {
  return ip('netns', 'list').split('\n').map((l) => l.split(' ')[0]).filter(Boolean);
}

/** The network interfaces of the root namespace. */
export function rootLinks(): string[] {
  return (JSON.parse(ip('-j', 'link', 'show')) as Array<{ ifname: string }>).map((l) => l.ifname);
}

/**
 * A new lab: the switch namespace with its bridge up. `baseDir` holds each host's folder. Every
 * namespace and interface name carries a random tag, so labs of parallel runs never meet.
 */
export function createLab(baseDir: string): Lab {
  const tag = randomBytes(2).toString('hex');
  const subnet = `10.231.${1 + Math.floor(Math.random() * 254)}`;
  const switchNs = `vcf${tag}-switch`;
  const bridge = `vcfbr${tag}`;
  const namespaces: string[] = [];
  const hosts: LabHost[] = [];
  const processes: LabProcess[] = [];
  const seen: ProcId[] = [];
  let cleaned = false;

  const addNs = (name: string) => {
    ip('netns', 'add', name);
    namespaces.push(name);
    ip('-n', name, 'link', 'set', 'lo', 'up');
  };
  try {
    addNs(switchNs);
    ip('-n', switchNs, 'link', 'add', bridge, 'type', 'bridge');
    ip('-n', switchNs, 'link', 'set', bridge, 'up');
  } catch (err) {
    for (const ns of namespaces) execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
    throw err;
  }

  const lab: Lab = {
    tag, subnet, switchNs, hosts, processes,
    addHost(role) {
      const index = hosts.length;
      const ns = `vcf${tag}-${role}`;
      addNs(ns);
      const port = `vp${tag}${index}`;
      ip('-n', switchNs, 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
      ip('-n', switchNs, 'link', 'set', port, 'master', bridge, 'up');
      const addr = `${subnet}.${10 + index}`;
      ip('-n', ns, 'addr', 'add', `${addr}/24`, 'dev', 'eth0');
      ip('-n', ns, 'link', 'set', 'eth0', 'up');
      const dir = path.join(baseDir, role);
      const host: LabHost = { role, ns, addr, dir, home: path.join(dir, 'home'), work: path.join(dir, 'work') };
      mkdirSync(host.home, { recursive: true });
      mkdirSync(host.work, { recursive: true });
      hosts.push(host);
      return host;
    },
    start(host, argv, options = {}) {
      const enter = ['--net=/run/netns/' + host.ns];
      const command = options.private
        ? ['nsenter', ...enter, 'unshare', '--mount', '--uts', '--propagation', 'private',
            'sh', '-c', PRIVATE_HOST_SCRIPT, 'sh', host.role, host.work, host.home, ...codeFolders(), '--', ...argv]
        : ['nsenter', ...enter, ...argv];
      const env = options.private ? { HOME: PRIVATE_HOME, ...options.env } : { HOME: host.home, ...options.env };
      const child = spawn(command[0], command.slice(1), {
        cwd: ROOT,
        env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const p: LabProcess = { host, child, ...captured(child) };
      processes.push(p);
      return p;
    },
    async cleanup() {
      if (cleaned) return [];
      cleaned = true;
      const problems: string[] = [];
      // Everything below our processes (sandboxes live in namespaces of their own), then everything in our namespaces.
      for (const p of processes) if (p.child.pid) seen.push(...descendants(p.child.pid));
      for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
      for (const ns of namespaces) {
        for (const pid of nsPids(ns)) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // exited meanwhile
          }
        }
      }
      for (const id of stillAlive(seen)) {
        try {
          process.kill(id.pid, 'SIGKILL');
        } catch {
          // exited meanwhile
        }
      }
      await Promise.race([Promise.all(processes.map((p) => p.exited)), sleep(10_000)]);
      for (let i = 0; i < 50 && stillAlive(seen).length; i++) await sleep(100);
      for (const id of stillAlive(seen)) problems.push(`process ${id.pid} still runs: ${id.cmd.slice(0, 120)}`);
      const pids = processes.map((p) => p.child.pid).filter((pid): pid is number => pid !== undefined);
      for (const dir of sandboxCgroupsOf(pids)) {
        problems.push(`sandbox cgroup left behind: ${dir}`);
        try {
          rmdirSync(dir);
        } catch (err) {
          problems.push(`cannot remove ${dir}: ${(err as Error).message}`);
        }
      }
      for (const ns of namespaces.splice(0).reverse()) {
        const left = nsPids(ns);
        if (left.length) problems.push(`namespace ${ns} still has processes ${left.join(', ')}`);
        try {
          ip('netns', 'del', ns);
        } catch (err) {
          problems.push(`ip netns del ${ns}: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`);
        }
      }
      return problems;
    },
  };
  return lab;
}

/** The processes in a network namespace. */
function nsPids(ns: string): number[] {
  try {
    return ip('netns', 'pids', ns).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * The sandbox cgroups (`vcfleet-<pid>-...`, sandbox-cgroup.ts) that the processes `pids` made beside
 * this process's own cgroups. Hosts of a lab share one kernel, so a worker killed on one of them
 * leaves its sandbox cgroup where a real host would lose it with the machine.
 */
export function sandboxCgroupsOf(pids: readonly number[]): string[] {
  const mounts = parseMountinfo(readText('/proc/self/mountinfo')).filter((m) => m.fsType === 'cgroup' || m.fsType === 'cgroup2');
  const own = readText('/proc/self/cgroup').split('\n').filter(Boolean).map((line) => {
    const [id, ctrls, ...rest] = line.split(':');
    return { v2: id === '0', controllers: ctrls ? ctrls.split(',') : [], path: rest.join(':') };
  });
  const parents = new Set<string>();
  for (const m of mounts) {
    const cg = own.find((c) => (m.fsType === 'cgroup2' ? c.v2 : c.controllers.some((k) => m.superOptions.includes(k))));
    if (!cg) continue;
    const root = m.root === '/' ? '' : m.root;
    if (root && !cg.path.startsWith(root)) continue;
    const dir = path.join(m.mountPoint, cg.path.slice(root.length));
    parents.add(dir);
    if (path.basename(dir) === WORKER_LEAF) parents.add(path.dirname(dir));
  }
  const names = new RegExp(`^vcfleet-(${pids.join('|') || 'none'})-\\d+-`);
  const found: string[] = [];
  for (const parent of parents) {
    for (const name of readdirSafe(parent)) if (names.test(name)) found.push(path.join(parent, name));
  }
  return found;
}

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
