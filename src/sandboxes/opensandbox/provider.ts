/**
 * The `opensandbox` provider: one remote sandbox per task through the official SDK
 * (`@alibaba-group/opensandbox`): `POST /v1/sandboxes` with the image, TTL, resource limits, env,
 * owner metadata and a `model_only` egress policy; commands through execd's streamed
 * `POST /command`; files through `/files/upload` and `/files/download`; `DELETE /v1/sandboxes/{id}`
 * on destroy. Deleting the sandbox is what kills every process a command left behind.
 */
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { Sandbox as SdkSandbox, SandboxManager, type ConnectionConfigOptions } from '@alibaba-group/opensandbox';
import { ConfigError, InfraError, errorMessage } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import { DEFAULT_MAX_CAPTURE_BYTES } from '../output-capture.ts';
import { runRemoteCommand } from './exec.ts';
import { DEFAULT_FLEET_LABEL, META, labelValue, modelOnlyPolicy, ownerFromMetadata, ownerMetadata, shellJoin, shellQuote } from './labels.ts';
import { isAlive } from '../proc-tree.ts';
import { ExecTracker } from '../exec-tracker.ts';
import type { BoxReport, ExecOptions, ExecResult, LimitHits, Sandbox, SandboxCapabilities, SandboxProvider, SandboxSpec } from '../types.ts';
import { setTimeout as sleep } from 'node:timers/promises';

/** Where sandbox_image/Dockerfile installs OpenCode (`sandbox_config.opencode_bin`'s default). */
export const IMAGE_OPENCODE_BIN = '/opt/opencode/bin/opencode';

export interface OpenSandboxOptions {
  /** OpenSandbox server, `host[:port]` or a URL (`sandbox_config.domain`). */
  domain: string;
  /** Sent as `OPEN-SANDBOX-API-KEY` (`sandbox_config.api_key`). */
  apiKey?: string | null;
  image: string;
  /** OpenCode inside the image, by absolute path (`sandbox_config.opencode_bin`): the image's `PATH` does not survive a command's env. */
  opencodeBin?: string;
  /** Server-side lifetime of a sandbox, in seconds (`sandbox_config.ttl_s`). */
  ttlS: number;
  resources: { cpu: number; memory_mib: number };
  /** The work folder inside the sandbox (`sandbox_workdir`). */
  workdir: string;
  /** Value of the fleet label used to find this fleet's sandboxes; default `visual-coding-fleet`. */
  fleetLabel?: string;
  /** How long a new sandbox may take to answer execd pings, in seconds; default 120. */
  readyTimeoutS?: number;
  /** Timeout of one non-streamed API call, in seconds; default 60. */
  requestTimeoutS?: number;
  /** Bytes of `stdout` and of `stderr` kept in an ExecResult (the tail); default 16 MiB each. */
  maxCaptureBytes?: number;
  /** After interrupting a command (timeout, abort), how long to wait for its end, in ms; default 2000. */
  killGraceMs?: number;
  /** Reach each sandbox's execd through the server's proxy, for when its host ports are not reachable (`sandbox_config.use_server_proxy`). */
  useServerProxy?: boolean;
  logger?: Logger;
}

/**
 * What the server said, for a message: its `{code, message}` error, or the fields its validation
 * (`422 {"detail": [...]}`) refused, bounded; else the SDK's own message.
 */
export function describeServerError(err: unknown): string {
  const e = err as { statusCode?: number; error?: { code?: string; message?: string }; rawBody?: unknown };
  const detail = (e.rawBody as { detail?: unknown } | undefined)?.detail;
  if (Array.isArray(detail)) {
    const fields = detail.slice(0, 3).map((d: { loc?: unknown; msg?: unknown }) => {
      const loc = Array.isArray(d?.loc) ? d.loc.filter((x) => x !== 'body').map(String).join('.') : '?';
      return `${loc.slice(0, 80)}: ${String(d?.msg ?? 'invalid').slice(0, 200)}`;
    });
    return `the server refused the request (${e.statusCode ?? 422}): ${fields.join('; ')}`;
  }
  const code = e.error?.code;
  if (code && code !== 'UNEXPECTED_RESPONSE') return `${code}: ${String(e.error?.message ?? '').slice(0, 300)}`;
  return errorMessage(err);
}

/** The server's error code, when it gave one. */
function serverCode(err: unknown): string | undefined {
  return (err as { error?: { code?: string } }).error?.code;
}

class RemoteSandbox implements Sandbox {
  private readonly stop = new AbortController();
  private readonly running = new ExecTracker();
  private destroying: Promise<void> | null = null;

  constructor(
    private readonly sdk: SdkSandbox,
    readonly workdir: string,
    readonly gatewayUrl: string,
    private readonly env: Record<string, string>,
    private readonly limits: { maxCaptureBytes: number; killGraceMs: number },
    private readonly onDestroyed: (s: RemoteSandbox) => void,
    private readonly logger?: Logger,
  ) {}

  get id(): string {
    return this.sdk.id;
  }

  private resolve(p: string): string {
    return path.posix.resolve(this.workdir, p);
  }

  async putFile(pathInSandbox: string, content: Buffer | string): Promise<void> {
    const data = typeof content === 'string' ? content : new Uint8Array(content);
    await this.sdk.files.writeFiles([{ path: this.resolve(pathInSandbox), data, mode: 644 }]).catch((err: unknown) => {
      throw new InfraError(`opensandbox: upload of ${pathInSandbox} failed: ${errorMessage(err)}`, { cause: err });
    });
  }

  async getFile(pathInSandbox: string): Promise<Buffer> {
    const bytes = await this.sdk.files.readBytes(this.resolve(pathInSandbox)).catch((err: unknown) => {
      throw new InfraError(`opensandbox: download of ${pathInSandbox} failed: ${errorMessage(err)}`, { cause: err });
    });
    return Buffer.from(bytes);
  }

  exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    return this.running.track(this.id, this.stop.signal.aborted, argv, () => this.run(argv, options));
  }

  /** The server does not report what its sandboxes ran into. */
  async limitHits(): Promise<LimitHits> {
    return {};
  }

  private async run(argv: string[], options: ExecOptions): Promise<ExecResult> {
    const signal = options.signal ? AbortSignal.any([options.signal, this.stop.signal]) : this.stop.signal;
    if (signal.aborted) {
      return { exitCode: null, signal: null, stdout: '', stderr: '', timedOut: false, aborted: true, durationMs: 0 };
    }
    // execd runs `bash -c` with stdin at /dev/null; stdin text goes through a file.
    let stdinPath = '/dev/null';
    if (options.stdin !== undefined) {
      stdinPath = `/tmp/.vcfleet-stdin-${randomUUID()}`;
      await this.putFile(stdinPath, options.stdin);
    }
    return runRemoteCommand(this.sdk, {
      command: `${shellJoin(argv)} < ${shellQuote(stdinPath)}`,
      cwd: options.cwd ?? this.workdir,
      env: { ...this.env, ...options.env },
      timeoutMs: options.timeoutMs,
      signal,
      onStdoutLine: options.onStdoutLine,
      maxCaptureBytes: this.limits.maxCaptureBytes,
      stopGraceMs: this.limits.killGraceMs,
    });
  }

  /** Stops running commands, then deletes the sandbox (a 404 counts as deleted). Never throws. */
  destroy(): Promise<void> {
    this.destroying ??= (async () => {
      this.stop.abort();
      await this.running.settled();
      await deleteWithRetry(this.sdk, this.logger);
      // Closing the connection pool waits for open streams: bound it in case one still dangles.
      await Promise.race([this.sdk.close().catch(() => {}), sleep(5000, undefined, { ref: false })]);
      this.onDestroyed(this);
    })();
    return this.destroying;
  }
}

async function deleteWithRetry(sdk: SdkSandbox, logger?: Logger): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await sdk.kill();
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return;
      if (attempt >= 3) {
        logger?.error({ err, sandbox: sdk.id }, 'could not delete the sandbox; its TTL or reapOrphans will remove it');
        return;
      }
      await sleep(500 * attempt);
    }
  }
}

export class OpenSandboxProvider implements SandboxProvider {
  readonly name = 'opensandbox' as const;
  /**
   * Remote sandboxes reach the worker's gateway over TCP (nothing outside them tells the agent's calls
   * from others), on the server's memory, and live at most their TTL; OpenCode is the image's, run by
   * its absolute path (execd lays a command's env over the image's, so the image's `PATH` is gone).
   */
  readonly capabilities: SandboxCapabilities;
  private readonly live = new Set<RemoteSandbox>();
  private readonly connection: ConnectionConfigOptions;
  private readonly fleet: string;

  constructor(private readonly opts: OpenSandboxOptions) {
    this.connection = {
      domain: opts.domain,
      apiKey: opts.apiKey ?? undefined,
      requestTimeoutSeconds: opts.requestTimeoutS ?? 60,
      disableMetrics: true,
      useServerProxy: opts.useServerProxy ?? false,
    };
    this.fleet = opts.fleetLabel ?? DEFAULT_FLEET_LABEL;
    this.capabilities = { gateway: 'tcp', verifiesCallOrigin: false, usesHostMemory: false, agentBinary: () => opts.opencodeBin ?? IMAGE_OPENCODE_BIN, maxLifetimeS: opts.ttlS, image: opts.image };
  }

  async create(spec: SandboxSpec, signal?: AbortSignal): Promise<Sandbox> {
    signal?.throwIfAborted();
    if (!spec.gateway.url) throw new ConfigError('the opensandbox provider needs the gateway URL the sandbox can reach');
    const env = spec.env ?? {};
    const sdk = await SdkSandbox.create({
      connectionConfig: this.connection,
      image: this.opts.image,
      timeoutSeconds: this.opts.ttlS,
      resource: { cpu: String(this.opts.resources.cpu), memory: `${this.opts.resources.memory_mib}Mi` },
      env,
      metadata: ownerMetadata(this.fleet, spec.label),
      networkPolicy: modelOnlyPolicy(spec.gateway.url),
      readyTimeoutSeconds: this.opts.readyTimeoutS ?? 120,
    }).catch((err: unknown) => {
      throw this.createError(err);
    });
    const limits = { maxCaptureBytes: this.opts.maxCaptureBytes ?? DEFAULT_MAX_CAPTURE_BYTES, killGraceMs: this.opts.killGraceMs ?? 2000 };
    const sandbox = new RemoteSandbox(sdk, this.opts.workdir, spec.gateway.url, env, limits, (s) => this.live.delete(s), this.opts.logger);
    this.live.add(sandbox);
    try {
      signal?.throwIfAborted();
      const mk = await sandbox.exec(['mkdir', '-p', this.opts.workdir], { cwd: '/', signal });
      signal?.throwIfAborted();
      if (mk.exitCode !== 0) throw new InfraError(`opensandbox: cannot create ${this.opts.workdir}: ${mk.stderr.trim()}`);
    } catch (err) {
      await sandbox.destroy();
      throw err;
    }
    this.opts.logger?.debug({ sandbox: sandbox.id }, 'sandbox created');
    return sandbox;
  }

  /** A create the server refused, as the error that says what to change. */
  private createError(err: unknown): Error {
    const said = describeServerError(err);
    const server = `the OpenSandbox server ${this.opts.domain}`;
    switch (serverCode(err)) {
      case 'SANDBOX::INVALID_PARAMETER':
        if (/network|egress/i.test(said)) {
          return new ConfigError(
            `opensandbox: ${server} refuses the model_only network policy (${said}): it has no egress image, so it cannot keep a sandbox to the gateway alone. ` +
              'Configure one in the server\'s config (`[egress] image = "opensandbox/egress:<version>"` in ~/.sandbox.toml) and restart it',
            { cause: err },
          );
        }
        break;
      case 'MISSING_API_KEY':
      case 'INVALID_API_KEY':
        return new ConfigError(`opensandbox: ${server} refuses this worker's API key (${said}): set sandbox_config.api_key (OPENSANDBOX_API_KEY) to its server.api_key`, { cause: err });
      case 'DOCKER::SANDBOX_IMAGE_PULL_FAILED':
        return new InfraError(`opensandbox: ${server} cannot pull the sandbox image ${this.opts.image} (${said}): push it where the server pulls from, or set sandbox_config.image (VISUAL_CODING_OPENCODE_SANDBOX_IMAGE)`, { cause: err });
    }
    if ((err as { statusCode?: number }).statusCode === 422) return new ConfigError(`opensandbox: ${server} refused the sandbox's settings: ${said}`, { cause: err });
    return new InfraError(`opensandbox: could not create a sandbox from ${this.opts.image}: ${said}`, { cause: err });
  }

  /** Every limit is the OpenSandbox server's to enforce: cpu and memory are asked for per sandbox, the rest is its runtime's. */
  async probe(): Promise<BoxReport> {
    const server = `the OpenSandbox server ${this.opts.domain}`;
    const runtime = { enforced: true, detail: `by ${server}'s container runtime (not set by this worker)` };
    return {
      memory: { enforced: true, detail: `by ${server}: ${this.opts.resources.memory_mib}Mi per sandbox` },
      cpu: { enforced: true, detail: `by ${server}: ${this.opts.resources.cpu} CPUs per sandbox` },
      pids: runtime,
      disk: runtime,
      seccomp: runtime,
      user: { enforced: true, detail: `by ${server}: the sandbox image's own user (${this.opts.image})` },
    };
  }

  /** Deletes this fleet's sandboxes on this host whose owning worker process is gone. */
  async reapOrphans(): Promise<number> {
    const manager = SandboxManager.create({ connectionConfig: this.connection });
    try {
      const filter = { [META.fleet]: labelValue(this.fleet), [META.host]: labelValue(os.hostname()) };
      const orphans: string[] = [];
      for (let page = 1; ; page++) {
        const res = await manager.listSandboxInfos({ metadata: filter, page, pageSize: 100 });
        for (const info of res.items) {
          const owner = ownerFromMetadata(info.metadata);
          if (owner && !isAlive(owner)) orphans.push(info.id);
        }
        if (!res.pagination?.hasNextPage) break;
      }
      for (const id of orphans) await manager.killSandbox(id).catch((err: unknown) => this.opts.logger?.warn({ err, id }, 'could not delete an orphaned sandbox'));
      if (orphans.length > 0) this.opts.logger?.info({ reaped: orphans.length }, 'deleted orphaned sandboxes');
      return orphans.length;
    } catch (err) {
      throw new InfraError(`opensandbox: could not list sandboxes to reap: ${errorMessage(err)}`, { cause: err });
    } finally {
      await manager.close();
    }
  }

  /** Deletes every sandbox this provider created that is still alive (worker shutdown). */
  async close(): Promise<void> {
    await Promise.allSettled([...this.live].map((s) => s.destroy()));
  }
}
