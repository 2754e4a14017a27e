/**
 * The real AgentRunner: one OpenCode session per rollout in a fresh sandbox. Per rollout: start the
 * policy gateway -> create the sandbox -> put the puzzle image and OpenCode's seed files -> run
 * `opencode run` with the prompt on stdin -> read its events -> decide the outcome. The sandbox is
 * destroyed and the gateway closed on every path.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { AgentResult, AgentRunner, RolloutRequest } from '../../../shared/agent.ts';
import { extractBoxedAnswer } from '../../../shared/answer.ts';
import type { Config } from '../../../shared/config.ts';
import { ConfigError, InfraError, errorMessage } from '../../../shared/errors.ts';
import type { Logger } from '../../../shared/logger.ts';
import { imageExtension } from '../../../shared/task.ts';
import type { ExecResult, Sandbox, SandboxProvider, SandboxSpec } from '../sandboxes/types.ts';
import { startPolicyGateway, type PolicyGateway } from '../gateway/policy-gateway.ts';
import { DEFAULT_UPSTREAM_FAILURE_LIMITS, upstreamGiveUpReason, type UpstreamFailureLimits } from '../gateway/health.ts';
import { opencodeBinaryPath } from './binary.ts';
import { GATEWAY_DIR_PREFIX } from './gateway-dirs.ts';
import { SessionEventLog } from './events.ts';
import { decideOutcome, type OutcomeInput } from './outcome.ts';
import { buildOpenCodeConfig, buildOpenCodeEnv, buildRunArgv, seedFiles, sessionPaths } from './session-config.ts';
import { transcriptPathFor, writeTranscript } from './transcript.ts';

export interface OpenCodeRunnerOptions {
  config: Config;
  logger: Logger;
  provider: SandboxProvider;
  /**
   * The OpenCode binary as seen inside the sandbox. Default: for `local`, the host binary (mounted
   * read-only at the same path, see `opencodeRoBinds`); for `opensandbox`, `agent.opencode_bin` or
   * `opencode` on the image's PATH.
   */
  opencodeBin?: string;
  /** Port on which the gateway appears inside a `local` sandbox; default 18080. */
  gatewayPort?: number;
  /** Host folder for the gateways' Unix sockets; default the OS temp folder. */
  socketDir?: string;
  /** When to give up on a policy server that only fails (defaults: 5 failures in a row, or 120 s). */
  upstreamFailureLimits?: Partial<UpstreamFailureLimits>;
}

type StopCause = OutcomeInput['stoppedBy'];

interface SessionRun {
  log: SessionEventLog;
  exec: ExecResult | null;
  stoppedBy: StopCause;
  opencodeLog: OpenCodeLogSummary;
}

export interface OpenCodeLogSummary {
  /** Lines OpenCode wrote to its log (0 when it could not be read). */
  lines: number;
  /** Its error and warning lines, and any failed fetch. */
  kept: string[];
}

export function createOpenCodeRunner(options: OpenCodeRunnerOptions): AgentRunner {
  const { config, logger, provider } = options;
  const limits: UpstreamFailureLimits = { ...DEFAULT_UPSTREAM_FAILURE_LIMITS, ...options.upstreamFailureLimits };
  const bin =
    options.opencodeBin ?? (provider.name === 'local' ? opencodeBinaryPath(config) : (config.agent.opencode_bin ?? 'opencode'));
  const gatewayPort = options.gatewayPort ?? 18080;
  const active = new Set<AbortController>();

  async function startGateway(request: RolloutRequest, accessToken: string, onCall: () => void) {
    const capture = request.policy.capture
      ? { path: transcriptPathFor(request.transcriptDir, request.rolloutId, '.calls.jsonl'), imageDir: path.join(request.transcriptDir, 'images') }
      : null;
    const common = {
      upstreamBaseUrl: request.policy.baseUrl,
      apiKey: request.policy.apiKey,
      accessToken,
      maxOutputTokens: request.policy.maxOutputTokens,
      // A little after OpenCode's own request timeout, so OpenCode reports it first.
      requestTimeoutMs: request.policy.requestTimeoutS * 1000 + 5_000,
      capture,
      logger,
      onCall,
    };
    if (provider.name === 'local') {
      const parent = options.socketDir ?? os.tmpdir();
      const dir = await mkdir(parent, { recursive: true })
        .then(() => mkdtemp(path.join(parent, GATEWAY_DIR_PREFIX)))
        .catch((err: unknown) => {
          throw new InfraError(`could not create a folder for the gateway socket under ${parent}: ${errorMessage(err)}`, { cause: err });
        });
      const gateway = await startPolicyGateway({ ...common, socketPath: path.join(dir, 'gateway.sock') }).catch(async (err: unknown) => {
        await rm(dir, { recursive: true, force: true });
        throw new InfraError(`could not start the policy gateway: ${errorMessage(err)}`, { cause: err });
      });
      const spec: SandboxSpec['gateway'] = { socketPath: gateway.socketPath, port: gatewayPort };
      return { gateway, spec, cleanup: () => rm(dir, { recursive: true, force: true }) };
    }
    const host = config.sandbox_config.gateway_host;
    if (!host) throw new ConfigError('sandbox_config.gateway_host (VCFLEET_GATEWAY_HOST) must name this worker as the sandboxes reach it');
    const gateway = await startPolicyGateway({ ...common, tcp: { host: '0.0.0.0', port: 0 } });
    const spec: SandboxSpec['gateway'] = { url: `http://${host}:${gateway.tcpPort}`, port: gateway.tcpPort! };
    return { gateway, spec, cleanup: async () => {} };
  }

  async function runSession(
    request: RolloutRequest,
    sandbox: Sandbox,
    accessToken: string,
    deadline: number,
    stop: AbortController,
    stopCause: { value: StopCause },
  ): Promise<SessionRun> {
    const paths = sessionPaths(sandbox.workdir);
    const imagePath = `${paths.workdir}/puzzle.${imageExtension(request.image.mime)}`;
    try {
      await sandbox.putFile(imagePath, request.image.bytes);
      for (const f of seedFiles(paths)) await sandbox.putFile(f.path, f.content);
    } catch (err) {
      throw new InfraError(`could not put the task files into the sandbox: ${errorMessage(err)}`, { cause: err });
    }
    const ocConfig = buildOpenCodeConfig({
      gatewayBaseUrl: `${sandbox.gatewayUrl.replace(/\/+$/, '').replace(/\/v1$/, '')}/v1`,
      accessToken,
      modelName: request.policy.modelName,
      contextWindow: request.policy.contextWindow,
      maxOutputTokens: request.policy.maxOutputTokens,
      requestTimeoutS: request.policy.requestTimeoutS,
    });
    const env = buildOpenCodeEnv(paths, ocConfig, request.policy.maxOutputTokens);
    const log = new SessionEventLog();
    const maxTools = config.agent.max_tool_calls;
    let exec: ExecResult;
    try {
      exec = await sandbox.exec(buildRunArgv(bin, request.policy.modelName, request.rolloutId, imagePath), {
        cwd: paths.workdir,
        env,
        stdin: request.task.prompt,
        timeoutMs: Math.max(1, deadline - Date.now()),
        signal: stop.signal,
        onStdoutLine: (line) => {
          if (log.push(line) === 'tool_use' && log.toolCalls.length > maxTools && !stop.signal.aborted) {
            stopCause.value = { kind: 'tool_cap', message: `the tool-call budget was exceeded (${log.toolCalls.length} > agent.max_tool_calls=${maxTools})` };
            stop.abort(new Error('tool-call budget exceeded'));
          }
        },
      });
    } catch (err) {
      throw new InfraError(`could not run OpenCode in the sandbox: ${errorMessage(err)}`, { cause: err });
    }
    // Skip the log when the worker is shutting down (stopped, but not by one of our own limits).
    const shuttingDown = stop.signal.aborted && stopCause.value === null && !exec.timedOut;
    const opencodeLog = shuttingDown ? { lines: 0, kept: [] } : await readOpenCodeLog(sandbox, paths.stateDir);
    return { log, exec, stoppedBy: stopCause.value, opencodeLog };
  }

  async function run(request: RolloutRequest, signal: AbortSignal): Promise<AgentResult> {
    const started = Date.now();
    const deadline = started + request.timeoutS * 1000;
    const startedAt = new Date(started).toISOString();
    if (signal.aborted) throw new InfraError('the rollout was aborted before it started', { cause: signal.reason });
    const accessToken = `vcfleet-${randomBytes(18).toString('hex')}`;
    const ours = new AbortController();
    const stop = new AbortController();
    const onOuterAbort = () => stop.abort(signal.reason);
    signal.addEventListener('abort', onOuterAbort, { once: true });
    active.add(ours);
    ours.signal.addEventListener('abort', () => stop.abort(ours.signal.reason), { once: true });
    const stopCause: { value: StopCause } = { value: null };
    let gateway: PolicyGateway | null = null;
    const checkHealth = () => {
      if (!gateway || stop.signal.aborted) return;
      const why = upstreamGiveUpReason(gateway.stats(), limits);
      if (why) {
        stopCause.value = { kind: 'upstream', message: why };
        stop.abort(new Error(why));
      }
    };
    const rlog = logger.child({ rolloutId: request.rolloutId, taskId: request.task.task_id });
    let sandbox: Sandbox | null = null;
    let session: SessionRun | null = null;
    let cleanupGateway: () => Promise<void> = async () => {};
    const healthTimer = setInterval(checkHealth, 2_000);
    try {
      const g = await startGateway(request, accessToken, checkHealth);
      gateway = g.gateway;
      cleanupGateway = g.cleanup;
      try {
        sandbox = await provider.create({ label: request.rolloutId, gateway: g.spec }, stop.signal);
      } catch (err) {
        if (err instanceof InfraError || err instanceof ConfigError) throw err;
        throw new InfraError(`could not create a ${provider.name} sandbox: ${errorMessage(err)}`, { cause: err });
      }
      rlog.debug({ sandbox: sandbox.id }, 'sandbox ready; starting OpenCode');
      session = await runSession(request, sandbox, accessToken, deadline, stop, stopCause);
    } finally {
      clearInterval(healthTimer);
      signal.removeEventListener('abort', onOuterAbort);
      active.delete(ours);
      await sandbox?.destroy().catch((err: unknown) => rlog.error({ err }, 'could not destroy the sandbox'));
      await gateway?.close().catch((err: unknown) => rlog.error({ err }, 'could not close the policy gateway'));
      await cleanupGateway().catch(() => {});
    }
    if (signal.aborted || ours.signal.aborted) {
      throw new InfraError('the rollout was aborted (worker shutting down)', { cause: signal.reason ?? ours.signal.reason });
    }
    return finishRollout(request, session, gateway!, started, startedAt, rlog);
  }

  async function finishRollout(
    request: RolloutRequest,
    session: SessionRun,
    gateway: PolicyGateway,
    started: number,
    startedAt: string,
    rlog: Logger,
  ): Promise<AgentResult> {
    const { log, exec } = session;
    const stats = gateway.stats();
    const outcome = decideOutcome({
      log,
      exec: { exitCode: exec?.exitCode ?? null, signal: exec?.signal ?? null, timedOut: exec?.timedOut ?? false, stderr: exec?.stderr ?? '' },
      stoppedBy: session.stoppedBy,
      gateway: { stats, calls: gateway.calls },
    });
    const responseText = log.responseText();
    const stepTokens = log.tokenTotals();
    // The policy server's own usage counts are the truth when it reports them; else OpenCode's.
    const useGateway = stats.promptTokens + stats.completionTokens > 0;
    const result: AgentResult = {
      stopReason: outcome.kind === 'result' ? outcome.stopReason : 'agent_error',
      responseText,
      extractedAnswer: extractBoxedAnswer(responseText),
      turns: log.turns(),
      toolCalls: log.toolCalls.length,
      inputTokens: useGateway ? stats.promptTokens : stepTokens.inputTokens,
      outputTokens: useGateway ? stats.completionTokens : stepTokens.outputTokens,
      wallS: (Date.now() - started) / 1000,
      ...(outcome.kind === 'result' && outcome.stopReason !== 'answered' && outcome.error ? { error: outcome.error } : {}),
    };
    const transcriptPath = transcriptPathFor(request.transcriptDir, request.rolloutId);
    const secrets = request.policy.apiKey ? [request.policy.apiKey] : [];
    await writeTranscript(
      transcriptPath,
      {
        runId: request.runId, rolloutId: request.rolloutId, taskId: request.task.task_id, startedAt, result, log,
        gateway: { stats, calls: gateway.calls },
        exec: exec && { exitCode: exec.exitCode, signal: exec.signal, timedOut: exec.timedOut, aborted: exec.aborted, durationMs: exec.durationMs },
        stderr: exec?.stderr ?? '', opencodeLog: session.opencodeLog,
        infraError: outcome.kind === 'infra' ? outcome.message : undefined,
      },
      secrets,
    ).catch((err: unknown) => rlog.warn({ err }, 'could not write the transcript'));
    if (outcome.kind === 'infra') {
      rlog.warn({ reason: outcome.message, transcriptPath }, 'rollout failed on infrastructure');
      throw new InfraError(outcome.message);
    }
    rlog.info({ stopReason: result.stopReason, turns: result.turns, toolCalls: result.toolCalls, wallS: result.wallS }, 'rollout finished');
    return { ...result, transcriptPath };
  }

  return {
    run,
    async close() {
      for (const c of active) c.abort(new Error('runner closed'));
    },
  };
}

/**
 * OpenCode's own log, best effort: how many lines it wrote, and the lines worth keeping (errors,
 * warnings, failed fetches: OpenCode must never try to reach anything but the gateway).
 */
async function readOpenCodeLog(sandbox: Sandbox, stateDir: string): Promise<OpenCodeLogSummary> {
  try {
    const r = await sandbox.exec(['/bin/sh', '-c', 'cat "$1"/data/opencode/log/*.log 2>/dev/null | tail -c 400000', 'sh', stateDir], { timeoutMs: 10_000 });
    const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
    const kept = lines.filter((l) => /level=(ERROR|WARN)|Failed to fetch|fetch failed|stream error/i.test(l)).slice(-200).map((l) => l.slice(0, 1000));
    return { lines: lines.length, kept };
  } catch {
    return { lines: 0, kept: [] };
  }
}
