/**
 * One interface for every sandbox provider (`local` bubblewrap, `opensandbox`). A sandbox is created
 * per rollout and always destroyed, on every path.
 */

export interface SandboxSpec {
  /** A short label for names and logs (the rollout id). */
  label: string;
  /**
   * How the sandbox reaches the policy model: the worker's per-task gateway. `local` exposes a Unix
   * socket of the host as `http://127.0.0.1:<port>` inside the sandbox; `opensandbox` reaches `url`.
   */
  gateway: { socketPath?: string; url?: string; port: number };
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
  /** Times the sandbox hit a resource limit so far, by limit (`{memory: 1}`); empty when none or unknown. */
  limitHits(): Promise<Record<string, number>>;
  /** Kills everything in the sandbox and removes it. Safe to call twice. */
  destroy(): Promise<void>;
}

export interface SandboxProvider {
  readonly name: 'local' | 'opensandbox';
  /** Throws InfraError when the provider cannot create a sandbox. */
  create(spec: SandboxSpec, signal?: AbortSignal): Promise<Sandbox>;
  /** Remove sandboxes that a dead worker of this host left behind; returns how many. */
  reapOrphans(): Promise<number>;
  close(): Promise<void>;
}
