/**
 * One rollout of the real agent, in explicit phases: open the policy gateway -> create the sandbox ->
 * put the puzzle and OpenCode's seed files in -> run `opencode run` with the prompt on stdin under
 * the task deadline -> read the sandbox's limit hits -> tear everything down (always) -> decide the
 * outcome from what the gateway saw and how the process ended. One abort path: the worker's signal,
 * the runner closing, and the session's own budgets (tool calls, policy calls, a policy server that
 * only fails) all abort `stop`, and the cause, when it is ours, is kept for the outcome.
 */
import { randomBytes } from 'node:crypto';
import type { AgentResult, RolloutRequest } from '../shared/ports/agent.ts';
import { responseTail, rolloutOutcome } from '../shared/records/rollout-outcome.ts';
import { ConfigError, InfraError, errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { stripCredentials } from '../shared/config/run-settings.ts';
import { imageExtension } from '../shared/records/task.ts';
import type { ExecResult, LimitHits, Sandbox, SandboxProvider } from '../sandboxes/index.ts';
import { upstreamGiveUpReason, type UpstreamFailureLimits } from './upstream-give-up.ts';
import { isAnswered, probePolicyServer, type ProbeResult } from '../gateway/index.ts';
import { decideSessionEnd, sessionAnswer, type SessionEnd, type StopCause } from './session-end.ts';
import { buildOpenCodeConfig, buildOpenCodeEnv, buildRunArgv, seedFiles, sessionPaths } from './session-config.ts';
import { openSessionGateway, type SessionGateway, type SessionGatewayOptions } from './session-gateway.ts';
import { buildTranscript } from './transcript-builder.ts';
import { PolicyWaitExceeded } from '../pacing/index.ts';
import { ModelClock } from './model-clock.ts';
import { buildTrajectory } from './trajectory-builder.ts';
import { tokenCaptureSummary } from '../shared/records/trajectory.ts';

export interface SessionDeps {
  provider: SandboxProvider;
  logger: Logger;
  /** The OpenCode binary as seen inside the sandbox. */
  bin: string;
  gateway: Omit<SessionGatewayOptions, 'capabilities' | 'logger'>;
  upstreamLimits: UpstreamFailureLimits;
  /** Names the first limit of the sandbox that was hit, or null. */
  describeLimitHit(hits: LimitHits): string | null;
  /** OpenCode's runtime heap budget in MiB (agent.runtime_heap_mib), or null for its own. */
  runtimeHeapMib?: number | null;
  /** The gateway's own probe of the policy server (default: one tiny chat call, gateway/probe.ts). */
  probe?: (baseUrl: string, apiKey: string | null, model: string) => Promise<ProbeResult>;
}

interface Collected {
  exec: ExecResult;
  limitHits: LimitHits;
}

/** Thrown when the rollout ended because the worker is stopping: never a row, the job goes back. */
export class RolloutAborted extends InfraError {
  override name = 'RolloutAborted';
}

export class RolloutSession {
  private readonly stop = new AbortController();
  private cause: StopCause | null = null;
  private readonly accessToken = `vcfleet-${randomBytes(18).toString('hex')}`;
  private readonly started = Date.now();
  private readonly log: Logger;
  private gw: SessionGateway | null = null;
  private sandbox: Sandbox | null = null;
  private clock: ModelClock | null = null;

  constructor(private readonly deps: SessionDeps, private readonly request: RolloutRequest) {
    this.log = deps.logger.child({ rollout_id: request.rolloutId, task_id: request.task.task_id });
  }

  /** Stop the session now (worker shutdown, runner closed). */
  abort(reason: unknown): void {
    this.stop.abort(reason);
  }

  async run(signal: AbortSignal): Promise<AgentResult> {
    if (signal.aborted) throw new RolloutAborted('the rollout was aborted before it started', { cause: signal.reason });
    const onAbort = () => this.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const health = setInterval(() => this.checkHealth(), 2_000);
    let collected: Collected;
    try {
      await this.openGateway();
      await this.createSandbox();
      await this.putFiles();
      collected = await this.runOpenCode();
    } finally {
      clearInterval(health);
      signal.removeEventListener('abort', onAbort);
      await this.teardown();
    }
    if (this.stop.signal.aborted && this.cause === null && !collected.exec.timedOut) {
      throw new RolloutAborted('the rollout was aborted (worker shutting down)', { cause: this.stop.signal.reason });
    }
    if (this.cause?.kind === 'policy_wait') throw new PolicyWaitExceeded(this.cause.message);
    return this.finish(collected, await this.decide(collected));
  }

  private stopFor(cause: StopCause): void {
    if (this.stop.signal.aborted) return;
    this.cause = cause;
    this.stop.abort(new Error(cause.message));
  }

  private checkHealth(): void {
    const gateway = this.gw?.gateway;
    if (!gateway) return;
    const stats = gateway.stats();
    const why = upstreamGiveUpReason(stats, this.deps.upstreamLimits);
    if (why) this.stopFor({ kind: 'upstream', message: `${why}; policy server ${stripCredentials(this.request.policy.baseUrl)}` });
    else if (stats.toolCalls > this.request.agent.max_tool_calls) {
      this.stopFor({ kind: 'tool_cap', message: `the tool-call budget was spent (${stats.toolCalls} > agent.max_tool_calls=${this.request.agent.max_tool_calls})` });
    }
  }

  private async openGateway(): Promise<void> {
    const budget = this.request.policy.settings.max_calls_per_rollout;
    const maxWaitS = this.request.pacing?.maxWaitS ?? 600;
    this.gw = await openSessionGateway({ ...this.deps.gateway, capabilities: this.deps.provider.capabilities, logger: this.log }, this.request, this.accessToken, {
      onCall: () => this.checkHealth(),
      onBudgetExhausted: () => this.stopFor({ kind: 'call_cap', message: `the policy-call budget was spent (policy.max_calls_per_rollout=${budget})` }),
      pace: this.request.pacing?.pace,
      maxWaitS,
      onWaitExceeded: (waitedS) => this.waitExceeded(waitedS, maxWaitS),
      onQuotaGone: (message) => this.stopFor({ kind: 'quota', message: `the policy server says the key's quota is gone (insufficient_quota: ${message.slice(0, 300)}); policy server ${stripCredentials(this.request.policy.baseUrl)}` }),
    });
  }

  /**
   * Held past `policy.max_wait_s`: the rollout goes back to the queue, unless the model made calls of
   * its own (they share the server's limit, so the wait may be its doing): then it is its timeout.
   */
  private waitExceeded(waitedS: number, maxWaitS: number): void {
    const forged = this.gw?.gateway.stats().forgedCalls ?? 0;
    const message = `the policy server kept pushing back (429/503): the agent's calls waited ${waitedS.toFixed(0)} s, past policy.max_wait_s=${maxWaitS}`;
    if (forged > 0) this.stopFor({ kind: 'call_cap', message: `${message}, while the model made ${forged} call(s) of its own` });
    else this.stopFor({ kind: 'policy_wait', message });
  }

  private async createSandbox(): Promise<void> {
    try {
      this.sandbox = await this.deps.provider.create({ label: this.request.rolloutId, gateway: this.gw!.spec }, this.stop.signal);
    } catch (err) {
      if (err instanceof InfraError || err instanceof ConfigError) throw err;
      throw new InfraError(`could not create a ${this.deps.provider.name} sandbox: ${errorMessage(err)}`, { cause: err });
    }
  }

  private async putFiles(): Promise<void> {
    const sandbox = this.sandbox!;
    const paths = sessionPaths(sandbox.workdir);
    try {
      await sandbox.putFile(this.imagePath(), this.request.image.bytes);
      for (const [i, img] of (this.request.moreImages ?? []).entries()) await sandbox.putFile(this.moreImagePath(i), img.bytes);
      for (const f of seedFiles(paths)) await sandbox.putFile(f.path, f.content);
    } catch (err) {
      throw new InfraError(`could not put the task files into the sandbox: ${errorMessage(err)}`, { cause: err });
    }
  }

  private imagePath(): string {
    return `${sessionPaths(this.sandbox!.workdir).workdir}/puzzle.${imageExtension(this.request.image.mime)}`;
  }

  /** The image after the first `index + 1` ones (a request with several): `puzzle-2.png`, ... */
  private moreImagePath(index: number): string {
    const img = this.request.moreImages![index];
    return `${sessionPaths(this.sandbox!.workdir).workdir}/puzzle-${index + 2}.${imageExtension(img.mime)}`;
  }

  private async runOpenCode(): Promise<Collected> {
    const sandbox = this.sandbox!;
    const { policy, rolloutId, task, timeoutS } = this.request;
    const paths = sessionPaths(sandbox.workdir);
    const ocConfig = buildOpenCodeConfig({
      gatewayBaseUrl: `${sandbox.gatewayUrl.replace(/\/+$/, '').replace(/\/v1$/, '')}/v1`,
      accessToken: this.accessToken,
      modelName: policy.model,
      contextWindow: policy.settings.context_window,
      maxOutputTokens: policy.settings.max_output_tokens,
      requestTimeoutS: policy.settings.request_timeout_s,
    });
    const gateway = this.gw!.gateway;
    // The task timeout is the model's time: the time the gateway held its calls is not counted (unless
    // the model made calls of its own, which share the server's limit: then every second counts).
    this.clock = new ModelClock(this.started, timeoutS * 1000, () => (gateway.stats().forgedCalls > 0 ? 0 : gateway.policyWaitS() * 1000), () =>
      this.stopFor({ kind: 'task_timeout', message: `the task timeout (${timeoutS} s) was reached before the session ended` }),
    );
    const maxWaitMs = (this.request.pacing?.maxWaitS ?? 600) * 1000;
    let exec: ExecResult;
    try {
      exec = await sandbox.exec(buildRunArgv(this.deps.bin, policy.model, rolloutId, this.imagePath(), (this.request.moreImages ?? []).map((_, i) => this.moreImagePath(i))), {
        cwd: paths.workdir,
        env: buildOpenCodeEnv(paths, ocConfig, policy.settings.max_output_tokens, this.deps.runtimeHeapMib ?? null),
        stdin: task.prompt,
        // The model's clock (above) ends it on time; this bounds it whatever the clock says.
        timeoutMs: Math.max(1, this.started + timeoutS * 1000 + maxWaitMs + 5_000 - Date.now()),
        signal: this.stop.signal,
      });
    } catch (err) {
      throw new InfraError(`could not run OpenCode in the sandbox: ${errorMessage(err)}`, { cause: err });
    } finally {
      this.clock.stop();
    }
    if (this.cause?.kind === 'task_timeout') exec = { ...exec, timedOut: true };
    const limitHits = await sandbox.limitHits().catch((err: unknown) => {
      this.log.warn({ err: errorMessage(err) }, 'could not read the sandbox limit counters');
      return {};
    });
    return { exec, limitHits };
  }

  private async teardown(): Promise<void> {
    await this.sandbox?.destroy().catch((err: unknown) => this.log.error({ err: errorMessage(err) }, 'could not destroy the sandbox'));
    await this.gw?.gateway.close().catch((err: unknown) => this.log.error({ err: errorMessage(err) }, 'could not close the policy gateway'));
    await this.gw?.cleanup().catch(() => undefined);
  }

  /**
   * How the session ended (session-end.ts). Once the model has acted, an infrastructure end needs
   * evidence the sandbox cannot produce: the gateway's own probe of the policy server must fail too;
   * when the server answers it, the failures were the conversation's own and the rollout scores 0.
   */
  private async decide({ exec, limitHits }: Collected): Promise<SessionEnd> {
    const gateway = this.gw!.gateway;
    const { policy } = this.request;
    const stats = gateway.stats();
    if (this.cause?.kind === 'quota') return { kind: 'infra', message: this.cause.message, policy: true, quota: true };
    const outcome = decideSessionEnd({
      calls: gateway.calls, stats, stoppedBy: this.cause?.kind === 'task_timeout' ? null : this.cause, limitHit: this.deps.describeLimitHit(limitHits),
      exec: { exitCode: exec.exitCode, signal: exec.signal, timedOut: exec.timedOut },
      policyUrl: stripCredentials(policy.baseUrl), taskTimeoutS: this.request.timeoutS, requestTimeoutS: policy.settings.request_timeout_s,
      stderrTail: exec.stderr.slice(-4000),
    });
    if (outcome.kind !== 'infra' || stats.answered === 0) return outcome;
    const probe = await (this.deps.probe ?? probePolicyServer)(policy.baseUrl, policy.apiKey, policy.model);
    if (!probe.ok) return { kind: 'infra', message: `${outcome.message}; ${probe.reason}`, policy: true };
    const { text, answer } = sessionAnswer(gateway.calls.filter(isAnswered));
    return {
      kind: 'result', stopReason: 'agent_error', responseText: text, extractedAnswer: answer,
      error: `${outcome.message}; the policy server answered the gateway's own probe, so the failures were this conversation's (scored 0, not masked)`,
    };
  }

  private finish({ exec, limitHits }: Collected, outcome: SessionEnd): AgentResult {
    const gateway = this.gw!.gateway;
    const { policy, task } = this.request;
    const calls = gateway.calls;
    const stats = gateway.stats();
    if (outcome.kind === 'infra') {
      this.log.warn({ reason: outcome.message }, 'rollout failed on infrastructure');
      throw new InfraError(outcome.message, { code: outcome.quota ? 'policy_quota' : outcome.policy ? 'policy_server' : 'other' });
    }
    const capture = gateway.tokenCapture;
    const trajectory = capture
      ? buildTrajectory({ request: this.request, policyModel: policy.model, weightVersion: policy.settings.weight_version, stopReason: outcome.stopReason, capture, images: gateway.images })
      : null;
    const result = rolloutOutcome({
      stop_reason: outcome.stopReason,
      extracted_answer: outcome.extractedAnswer,
      ...responseTail(outcome.responseText),
      turns: stats.answered,
      tool_calls: stats.toolCalls,
      input_tokens: stats.promptTokens,
      output_tokens: stats.completionTokens,
      wall_s: (Date.now() - this.started) / 1000,
      error: outcome.error,
      limit_hits: limitHits,
      refused_requests: stats.refused,
      forged_calls: stats.forgedCalls,
      policy_wait_s: Math.round(gateway.policyWaitS() * 1000) / 1000,
      token_capture: trajectory ? tokenCaptureSummary(trajectory) : null,
    });
    const transcript = this.request.transcript.enabled
      ? buildTranscript({
          request: this.request, policyModel: policy.model, startedAt: new Date(this.started).toISOString(), wallS: result.wall_s, calls,
          images: gateway.images,
          outcome: result,
          agent: { exit_code: exec.exitCode, signal: exec.signal, timed_out: exec.timedOut, stderr_tail: exec.stderr.slice(-8000) },
          cut: gateway.cut,
        })
      : null;
    this.log.info({ stop_reason: result.stop_reason, turns: result.turns, tool_calls: result.tool_calls, wall_s: result.wall_s, policy_wait_s: result.policy_wait_s, task_id: task.task_id }, 'rollout finished');
    return { outcome: result, transcript, trajectory: trajectory && capture ? { record: trajectory, images: trajectoryImages(trajectory.images, capture.images) } : null };
  }
}

/** The bytes of the images a trajectory names, as the gateway kept them (once each). */
function trajectoryImages(shas: readonly string[], kept: ReadonlyMap<string, { mime: string; bytes: Buffer | null }>): Map<string, { mime: string; bytes: Buffer }> {
  const out = new Map<string, { mime: string; bytes: Buffer }>();
  for (const sha of shas) {
    const img = kept.get(sha);
    if (img?.bytes) out.set(sha, { mime: img.mime, bytes: img.bytes });
  }
  return out;
}
