/**
 * One interface for every sandbox provider (`local` bubblewrap, `opensandbox`, ...). A sandbox is
 * created per rollout and always destroyed, on every path. What differs between providers, and
 * matters to the session around a sandbox, each provider declares in its `capabilities`; nothing
 * outside a provider's folder asks which provider it is.
 */
import type { Config } from '../shared/config/load.ts';
import type { Logger } from '../shared/logger.ts';

export interface SandboxSpec {
  /** A short label for names and logs (the rollout id). */
  label: string;
  /**
   * How the sandbox reaches the policy model: the worker's per-task gateway. `local` exposes a Unix
   * socket of the host as `http://127.0.0.1:<port>` inside the sandbox; `opensandbox` reaches `url`.
   */
  gateway: {
    /** The gateway's Unix socket for every connection whose origin the provider does not vouch for. */
    socketPath?: string;
    /** With `verifiesCallOrigin`: the socket that gets only the connections the agent process made. */
    agentSocketPath?: string;
    url?: string;
    port: number;
  };
  /** Environment of processes run in the sandbox (the worker's own environment is never passed). */
  env?: Record<string, string>;
}

export interface ExecOptions {
  /** Kill the command after this many milliseconds (its whole process tree). */
  timeoutMs?: number;
  signal?: AbortSignal;
  env?: Record<string, string>;
  /** Written to the command's stdin, which is then closed (never left open). */
  stdin?: string;
  /** Working directory inside the sandbox; default the sandbox workdir. */
  cwd?: string;
  /** Called for every complete stdout line as it arrives (no line-length cap). */
  onStdoutLine?: (line: string) => void;
}

export interface ExecResult {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  aborted: boolean;
  durationMs: number;
}

/** Limits of one sandbox (`sandbox_config.resources`). */
export interface SandboxResources {
  /** CPUs at once; fractions allowed. */
  cpu: number;
  /** Memory of everything in the sandbox, its tmpfs files included, in MiB. */
  memory_mib: number;
  /** Processes and threads at once. */
  pids: number;
  /** Workspace + /tmp + /dev/shm together, in MiB. */
  disk_mib: number;
}

/** The limits a sandbox ran into, counted by the host: the model's doing, not an infrastructure failure. */
export type LimitName = 'memory' | 'pids' | 'disk';
/** memory: OOM kills; pids: forks refused at the limit; disk: 1 when the sandbox disk was found full. */
export type LimitHits = Partial<Record<LimitName, number>>;

/** What a provider makes its sandboxes hold to. */
export type BoxResource = 'memory' | 'pids' | 'cpu' | 'disk' | 'seccomp' | 'user';
export interface BoxItem {
  enforced: boolean;
  /** How it is enforced (`cgroup v1 /sys/fs/cgroup/memory/...`), or why not (`cannot write ...: EACCES`). */
  detail: string;
}
export type BoxReport = Record<BoxResource, BoxItem>;

export interface Sandbox {
  readonly id: string;
  /** The writable work folder inside the sandbox (`sandbox_workdir`, default `/workspace`). */
  readonly workdir: string;
  /** The URL that reaches the policy gateway from inside the sandbox. */
  readonly gatewayUrl: string;
  putFile(pathInSandbox: string, content: Buffer | string): Promise<void>;
  getFile(pathInSandbox: string): Promise<Buffer>;
  /** A command that exits non-zero is a result, not an exception; failing to run it at all throws. */
  exec(argv: string[], options?: ExecOptions): Promise<ExecResult>;
  /** The limits hit so far (`{}`: none, or a provider that cannot tell). Still answers after destroy. */
  limitHits(): Promise<LimitHits>;
  /** Kills everything in the sandbox and removes it. Safe to call twice. */
  destroy(): Promise<void>;
}

/** What a provider's sandboxes offer the session around them. */
export interface SandboxCapabilities {
  /**
   * How a sandbox reaches its gateway: `unix`, sockets on this host that the provider bridges to
   * `127.0.0.1:<port>` inside the sandbox; `tcp`, a port of this host the sandbox reaches by name.
   */
  gateway: 'unix' | 'tcp';
  /**
   * Whether the provider tells the gateway which connections the agent process itself made (a bridge
   * outside the sandbox identifies each one): the agent's calls then come on `agentSocketPath`.
   */
  verifiesCallOrigin: boolean;
  /** The sandboxes run on this host, so its memory bounds them: admission counts them against it (`auto` slots). */
  usesHostMemory: boolean;
  /** The OpenCode binary as a sandbox runs it. */
  agentBinary(config: Pick<Config, 'agent'>): string;
  /** The longest a sandbox lives, in seconds (a server's TTL); null: as long as its task. */
  maxLifetimeS: number | null;
  /** The image a sandbox runs, whose OpenCode and toolkit the preflight looks for; null: this host's own files. */
  image: string | null;
}

export interface SandboxProvider {
  /** The provider's name (`sandbox_provider`), for messages and logs. */
  readonly name: string;
  readonly capabilities: SandboxCapabilities;
  /** Throws InfraError when the provider cannot create a sandbox. */
  create(spec: SandboxSpec, signal?: AbortSignal): Promise<Sandbox>;
  /** Remove sandboxes that a dead worker of this host left behind; returns how many. */
  reapOrphans(): Promise<number>;
  /** Which limits this provider's sandboxes are held to on this host, and how (or why not). */
  probe(): Promise<BoxReport>;
  close(): Promise<void>;
}

export interface SandboxProviderDeps {
  logger: Logger;
}

/** How the registry (index.ts) builds a provider: one per folder. */
export interface ProviderRegistration {
  /** One line for `--help` and messages. */
  summary: string;
  /** The provider, from this host's configuration (its sandbox settings); a ConfigError names what is missing. */
  create(config: Config, deps: SandboxProviderDeps): SandboxProvider;
}
