/**
 * The `docker` provider: one container per task from the sandbox image, through the Docker Engine
 * API (`dockerode`), on the worker's own host (the engine must see the worker's files: the gateway
 * socket is bind-mounted from it).
 *
 * Each container has no network at all (`NetworkMode: none`): its only door out is the task's
 * gateway, whose Unix socket is bind-mounted in alone and bridged to `127.0.0.1:<gateway.port>` by
 * the entry script of `local` sandboxes (sandbox-entry.py, run as `nobody`). It is held to the task's
 * limits as container limits: memory without swap, pids, CPUs, and tmpfs mounts for the workdir,
 * /tmp and /dev/shm whose sizes add up to `disk_mib` (a file may be at most `disk_mib` too); no
 * capability, no new privileges, a read-only root filesystem, the seccomp profile of `local`
 * sandboxes in Docker's format (sandbox-seccomp.json, from seccomp-filter.py), and the image's own
 * unprivileged user. Containers are labelled with the worker that owns them; a worker that starts
 * removes those of dead workers of its host.
 */
import { randomBytes } from 'node:crypto';
import { chmod, readFile } from 'node:fs/promises';
import os from 'node:os';
import Docker from 'dockerode';
import { ConfigError, InfraError, errorMessage } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import { reapOrphanGatewayDirs } from '../../gateway/index.ts';
import { DEFAULT_MAX_CAPTURE_BYTES } from '../output-capture.ts';
import { bootId, identityOf, isAlive } from '../proc-tree.ts';
import type { BoxReport, Sandbox, SandboxCapabilities, SandboxProvider, SandboxResources, SandboxSpec } from '../types.ts';
import { runDockerExec } from './exec.ts';
import { DockerSandbox, type DockerSandboxOptions } from './sandbox.ts';
import { containerOptions, DEFAULT_FLEET_LABEL, diskSplit, GATEWAY_SOCKET, HELPER_USER, IMAGE_OPENCODE, LABELS, labelValue, MIB } from './container-config.ts';


/** The entry script of `local` sandboxes, whose `--gateway` bridge a container runs too. */
const ENTRY_SCRIPT_URL = new URL('../box/sandbox-entry.py', import.meta.url);
const SECCOMP_PROFILE_URL = new URL('./sandbox-seccomp.json', import.meta.url);
export interface DockerProviderOptions {
  /** The sandbox image (`sandbox_config.image`): OpenCode on its PATH, python3, a USER that is not root. */
  image: string;
  /** The Docker engine's socket (`sandbox_config.docker_socket`); default DOCKER_HOST, else /var/run/docker.sock. */
  socketPath?: string | null;
  /** The work folder inside the sandbox (`sandbox_workdir`). */
  workdir: string;
  resources: SandboxResources;
  /** The OpenCode binary inside the image; default IMAGE_OPENCODE. */
  opencodeBin?: string;
  /** Value of the fleet label on every container; default `visual-coding-fleet`. */
  fleetLabel?: string;
  /** After a stopped command's processes are killed, how long to wait for its end, in ms; default 2000. */
  killGraceMs?: number;
  /** Bytes of `stdout` and of `stderr` kept in an ExecResult (the tail); default 16 MiB each. */
  maxCaptureBytes?: number;
  /** Where this host's gateways put their sockets (reaped with the containers); default the OS temp folder. */
  gatewaySocketDir?: string;
  logger?: Logger;
}

interface Ready {
  user: string;
  seccomp: string;
  entry: string;
}

export class DockerProvider implements SandboxProvider {
  readonly name = 'docker' as const;
  /** Containers on this host's engine: the gateway is a Unix socket of the host, their memory is this host's. */
  readonly capabilities: SandboxCapabilities;
  private readonly docker: Docker;
  private readonly live = new Set<DockerSandbox>();
  private ready: Promise<Ready> | null = null;
  private readonly fleet: string;
  private readonly where: string;

  constructor(private readonly opts: DockerProviderOptions) {
    this.docker = opts.socketPath ? new Docker({ socketPath: opts.socketPath }) : new Docker();
    this.where = opts.socketPath ?? (process.env.DOCKER_HOST || '/var/run/docker.sock');
    this.fleet = labelValue(opts.fleetLabel ?? DEFAULT_FLEET_LABEL);
    // OpenCode is the image's (agent.opencode_bin is a path of the worker's host).
    const bin = opts.opencodeBin ?? IMAGE_OPENCODE;
    this.capabilities = { gateway: 'unix', verifiesCallOrigin: false, usesHostMemory: true, agentBinary: () => bin, maxLifetimeS: null, image: opts.image };
  }

  /** The engine answers, the image is there and runs as a user that is not root; the profile and entry script are read. Once. */
  private ensureReady(): Promise<Ready> {
    this.ready ??= (async (): Promise<Ready> => {
      await this.docker.ping().catch((err: unknown) => {
        throw new InfraError(`docker: the Docker engine at ${this.where} does not answer (${errorMessage(err)}); start dockerd, or set sandbox_config.docker_socket`, { cause: err });
      });
      const image = await this.docker.getImage(this.opts.image).inspect().catch((err: unknown) => {
        if ((err as { statusCode?: number }).statusCode === 404) {
          throw new ConfigError(`docker: the sandbox image ${this.opts.image} is not in the engine at ${this.where}: build it with \`docker build -t ${this.opts.image} sandbox_image/\`, or set sandbox_config.image (VISUAL_CODING_OPENCODE_SANDBOX_IMAGE)`);
        }
        throw new InfraError(`docker: cannot inspect the sandbox image ${this.opts.image}: ${errorMessage(err)}`, { cause: err });
      });
      const user = image.Config?.User ?? '';
      if (user === '' || /^(root|0)(:.*)?$/.test(user)) {
        throw new ConfigError(`docker: the sandbox image ${this.opts.image} runs as root (USER ${user || 'unset'}); sandboxes never run as root: build it with a USER (sandbox_image/Dockerfile has one)`);
      }
      const [seccomp, entry] = await Promise.all([readFile(SECCOMP_PROFILE_URL, 'utf8'), readFile(ENTRY_SCRIPT_URL, 'utf8')]);
      return { user, seccomp: JSON.stringify(JSON.parse(seccomp)), entry };
    })().catch((err: unknown) => {
      this.ready = null;
      throw err;
    });
    return this.ready;
  }

  private labels(spec: SandboxSpec): Record<string, string> {
    const me = identityOf(process.pid);
    return {
      [LABELS.fleet]: this.fleet,
      [LABELS.host]: labelValue(os.hostname()),
      [LABELS.pid]: String(process.pid),
      [LABELS.start]: String(me?.startTime ?? 0),
      [LABELS.boot]: labelValue(bootId()),
      [LABELS.label]: labelValue(spec.label),
    };
  }

  async create(spec: SandboxSpec, signal?: AbortSignal): Promise<Sandbox> {
    signal?.throwIfAborted();
    const ready = await this.ensureReady();
    const r = this.opts.resources;
    const socket = spec.gateway.socketPath;
    if (socket) {
      // The container's helper user connects to it; its folder on this host stays the worker's alone.
      await chmod(socket, 0o666).catch((err: unknown) => {
        throw new InfraError(`docker: cannot open the gateway socket ${socket} to the sandbox: ${errorMessage(err)}`, { cause: err });
      });
    }
    const cmd = socket
      ? ['python3', '-I', '-S', '-c', ready.entry, '--gateway', String(spec.gateway.port), GATEWAY_SOCKET, '--', 'sleep', 'infinity']
      : ['sleep', 'infinity'];
    const name = `vcfleet-${labelValue(spec.label).slice(0, 40)}-${randomBytes(4).toString('hex')}`;
    const container = await this.docker
      .createContainer(containerOptions({ name, image: this.opts.image, workdir: this.opts.workdir, resources: r, cmd, labels: this.labels(spec), seccomp: ready.seccomp, socket }))
      .catch((err: unknown) => {
        throw new InfraError(`docker: could not create a sandbox container from ${this.opts.image}: ${errorMessage(err)}`, { cause: err });
      });
    const sandboxOpts: DockerSandboxOptions = {
      workdir: this.opts.workdir,
      user: ready.user,
      helperUser: HELPER_USER,
      diskMounts: [this.opts.workdir, '/tmp', '/dev/shm'],
      killGraceMs: this.opts.killGraceMs ?? 2000,
      maxCaptureBytes: this.opts.maxCaptureBytes ?? DEFAULT_MAX_CAPTURE_BYTES,
      maxFileBytes: r.disk_mib * MIB,
    };
    const sandbox = new DockerSandbox(container, `http://127.0.0.1:${spec.gateway.port}`, spec.env ?? {}, sandboxOpts, (s) => this.live.delete(s));
    this.live.add(sandbox);
    try {
      await container.start().catch((err: unknown) => {
        throw new InfraError(`docker: could not start a sandbox container: ${errorMessage(err)}`, { cause: err });
      });
      await this.openWorkdir(container);
      await sandbox.startWatcher();
      if (socket) await this.waitForBridge(container, spec.gateway.port, signal);
      signal?.throwIfAborted();
    } catch (err) {
      await sandbox.destroy().catch(() => {});
      throw err;
    }
    this.opts.logger?.debug({ sandbox: sandbox.id, image: this.opts.image }, 'sandbox created');
    return sandbox;
  }

  /**
   * The engine makes a tmpfs mount's root the image folder's copy, owned by root, whatever its `mode`
   * option says; root of the container (no capability) may still change the mode of its own folder.
   */
  private async openWorkdir(container: Docker.Container): Promise<void> {
    const r = await runDockerExec(container, {
      argv: ['/bin/chmod', '1777', '--', this.opts.workdir], user: '0:0', cwd: '/', env: {}, signal: new AbortController().signal,
      maxCaptureBytes: 4096, stop: async () => {}, stopGraceMs: 0, timeoutMs: 30_000,
    });
    if (r.exitCode !== 0) throw new InfraError(`docker: cannot open ${this.opts.workdir} to the sandbox's user: ${r.stderr.trim() || `exit code ${r.exitCode}`}`);
  }

  /** The bridge listens before the container's main process sleeps; wait until it does (or the container died). */
  private async waitForBridge(container: Docker.Container, port: number, signal?: AbortSignal): Promise<void> {
    const probe = `import socket, time\nfor _ in range(200):\n    try:\n        socket.create_connection(("127.0.0.1", ${port}), 1).close(); break\n    except OSError:\n        time.sleep(0.05)\nelse:\n    raise SystemExit("the gateway bridge is not listening on 127.0.0.1:${port}")\n`;
    const r = await runDockerExec(container, {
      argv: ['python3', '-I', '-S', '-c', probe], user: HELPER_USER, cwd: '/', env: {}, signal: signal ?? new AbortController().signal,
      maxCaptureBytes: 4096, stop: async () => {}, stopGraceMs: 0, timeoutMs: 30_000,
    });
    if (r.exitCode !== 0) {
      const state = await container.inspect().then((i) => i.State, () => null);
      const why = state && !state.Running ? `the container exited with code ${state.ExitCode}` : r.stderr.trim().split('\n').pop() || `exit code ${r.exitCode}`;
      throw new InfraError(`docker: the sandbox's gateway bridge did not start (${why}); the image needs python3`);
    }
  }

  /** What the engine enforces, from its own info: memory, pids and CPU limits, seccomp; disk and user are set per container. */
  async probe(): Promise<BoxReport> {
    let info: { MemoryLimit?: boolean; SwapLimit?: boolean; PidsLimit?: boolean; CpuCfsQuota?: boolean; SecurityOptions?: string[]; CgroupVersion?: string };
    try {
      info = (await this.docker.info()) as typeof info;
    } catch (err) {
      const detail = `the Docker engine at ${this.where} does not answer: ${errorMessage(err)}`;
      return { memory: { enforced: false, detail }, pids: { enforced: false, detail }, cpu: { enforced: false, detail }, disk: { enforced: false, detail }, seccomp: { enforced: false, detail }, user: { enforced: false, detail } };
    }
    const r = this.opts.resources;
    const d = diskSplit(r.disk_mib);
    const cg = `cgroup v${info.CgroupVersion ?? '1'}`;
    const engine = `the Docker engine at ${this.where}`;
    const seccomp = (info.SecurityOptions ?? []).some((o) => o.startsWith('name=seccomp'));
    return {
      memory: info.MemoryLimit && info.SwapLimit !== false
        ? { enforced: true, detail: `container memory ${r.memory_mib} MiB, no swap, tmpfs included (${cg})` }
        : { enforced: false, detail: `${engine} reports no ${info.MemoryLimit ? 'swap' : 'memory'} limit support (kernel cgroup memory accounting off?)` },
      pids: info.PidsLimit ? { enforced: true, detail: `container pids ${r.pids} (${cg})` } : { enforced: false, detail: `${engine} reports no pids limit support` },
      cpu: info.CpuCfsQuota ? { enforced: true, detail: `container CPUs ${r.cpu} (CFS quota, ${cg})` } : { enforced: false, detail: `${engine} reports no CFS quota support` },
      disk: { enforced: true, detail: `tmpfs ${this.opts.workdir} ${d.workdir} MiB + /tmp ${d.tmp} MiB + /dev/shm ${d.shm} MiB, files at most ${r.disk_mib} MiB, read-only root filesystem` },
      seccomp: seccomp ? { enforced: true, detail: 'the local sandboxes\' filter as a Docker profile (sandbox-seccomp.json); no capabilities, no new privileges' } : { enforced: false, detail: `${engine} has no seccomp support` },
      user: { enforced: true, detail: `the image's own user (${this.opts.image}, never root); bridge as nobody` },
    };
  }

  /** Removes this fleet's containers on this host whose owning worker process is gone, and dead gateway folders. */
  async reapOrphans(): Promise<number> {
    let list: Docker.ContainerInfo[];
    try {
      list = await this.docker.listContainers({ all: true, filters: { label: [`${LABELS.fleet}=${this.fleet}`, `${LABELS.host}=${labelValue(os.hostname())}`] } });
    } catch (err) {
      throw new InfraError(`docker: could not list containers to reap at ${this.where}: ${errorMessage(err)}`, { cause: err });
    }
    let reaped = 0;
    for (const c of list) {
      const l = c.Labels ?? {};
      const owner = { pid: Number(l[LABELS.pid]), startTime: Number(l[LABELS.start]), bootId: l[LABELS.boot] ?? '', hostname: os.hostname() };
      if (!Number.isSafeInteger(owner.pid) || owner.pid <= 0) continue;
      // A label is cut to the label charset: compare the boot id as it was written.
      const alive = owner.bootId === labelValue(bootId()) && isAlive({ ...owner, bootId: bootId() });
      if (alive) continue;
      try {
        await this.docker.getContainer(c.Id).remove({ force: true, v: true });
        reaped++;
      } catch (err) {
        this.opts.logger?.warn({ err: errorMessage(err), container: c.Id.slice(0, 12) }, 'could not remove an orphaned sandbox container');
      }
    }
    if (reaped > 0) this.opts.logger?.info({ reaped }, 'removed orphaned sandbox containers');
    const gateways = await reapOrphanGatewayDirs(this.opts.gatewaySocketDir ?? os.tmpdir());
    if (gateways > 0) this.opts.logger?.warn({ gateways }, 'removed gateway socket folders left behind by a dead worker of this host');
    return reaped;
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.live].map((s) => s.destroy()));
  }
}
