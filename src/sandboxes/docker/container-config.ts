/**
 * The container a `docker` sandbox is (provider.ts): its labels, its limits and the options the
 * Docker Engine API creates it with. No network at all, no capability, no new privileges, a
 * read-only root filesystem, the local sandboxes' seccomp filter, the helper user for its main
 * process (the gateway bridge), memory without swap, pids, CPUs, and tmpfs mounts for the workdir,
 * /tmp and /dev/shm whose sizes add up to `disk_mib`.
 */
import type Docker from 'dockerode';
import type { SandboxResources } from '../types.ts';

/** Where the gateway's socket appears inside a container. */
export const GATEWAY_SOCKET = '/run/vcfleet/gateway.sock';
/** Runs the bridge and the limit watcher: a user the sandboxed code cannot signal. */
export const HELPER_USER = '65534:65534';
const NOFILE = 4096;
/** Where sandbox_image/Dockerfile installs OpenCode. */
export const IMAGE_OPENCODE = '/opt/opencode/bin/opencode';
export const MIB = 1024 * 1024;

export const LABELS = {
  fleet: 'vcfleet.fleet',
  host: 'vcfleet.host',
  pid: 'vcfleet.owner-pid',
  start: 'vcfleet.owner-start',
  boot: 'vcfleet.boot',
  label: 'vcfleet.label',
} as const;
export const DEFAULT_FLEET_LABEL = 'visual-coding-fleet';

/** The tmpfs sizes, in MiB, that add up to `disk_mib`: the workdir most, /tmp a quarter, /dev/shm at most 64. */
export function diskSplit(diskMib: number): { workdir: number; tmp: number; shm: number } {
  const shm = Math.max(1, Math.min(64, Math.floor(diskMib / 8)));
  const tmp = Math.max(1, Math.floor(diskMib / 4));
  return { workdir: Math.max(1, diskMib - tmp - shm), tmp, shm };
}

/** A label value Docker and a reader both take: printable, bounded. */
export function labelValue(v: string): string {
  return v.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 63) || 'x';
}

export interface ContainerSpec {
  name: string;
  image: string;
  workdir: string;
  resources: SandboxResources;
  cmd: string[];
  labels: Record<string, string>;
  /** The seccomp profile, as JSON. */
  seccomp: string;
  /** The gateway socket on this host, bind-mounted read-only at GATEWAY_SOCKET; null when the gateway is reached otherwise. */
  socket: string | null | undefined;
}

/** The options of `createContainer` for one sandbox. */
export function containerOptions(c: ContainerSpec): Docker.ContainerCreateOptions {
  const r = c.resources;
  const disk = diskSplit(r.disk_mib);
  const tmpfs = (mib: number) => `rw,exec,nosuid,nodev,size=${mib}m`;
  return {
    name: c.name,
    Image: c.image,
    Entrypoint: [],
    Cmd: c.cmd,
    User: HELPER_USER,
    WorkingDir: '/',
    Labels: c.labels,
    HostConfig: {
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true', `seccomp=${c.seccomp}`],
      Init: true,
      Memory: r.memory_mib * MIB,
      MemorySwap: r.memory_mib * MIB,
      PidsLimit: r.pids,
      NanoCpus: Math.round(r.cpu * 1e9),
      Tmpfs: { [c.workdir]: tmpfs(disk.workdir), '/tmp': tmpfs(disk.tmp) },
      ShmSize: disk.shm * MIB,
      IpcMode: 'private',
      Ulimits: [
        { Name: 'nofile', Soft: NOFILE, Hard: NOFILE },
        { Name: 'fsize', Soft: r.disk_mib * MIB, Hard: r.disk_mib * MIB },
        { Name: 'core', Soft: 0, Hard: 0 },
      ],
      Binds: c.socket ? [`${c.socket}:${GATEWAY_SOCKET}:ro`] : [],
      LogConfig: { Type: 'none', Config: {} },
      RestartPolicy: { Name: 'no' },
    },
  };
}
