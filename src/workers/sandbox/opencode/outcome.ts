/**
 * How a session ended: a stop reason for every way the *model* can end, or an infrastructure
 * failure (which the runner throws as InfraError so the rollout is retried).
 *
 * - answered: a `\boxed{}` answer exists and no later step was cut by the output cap.
 * - no_answer: the session finished normally without one.
 * - output_cap: a step finished with reason `length` and no answer came in it or after it.
 * - context_limit: OpenCode reported ContextOverflowError.
 * - timeout: the task budget ran out, or the tool-call budget (`agent.max_tool_calls`) was
 *   exceeded. Both are harness budgets the model used up before answering; the tool-call case says so
 *   in `error`.
 * - agent_error: any other error event, a non-zero exit, or a permission auto-rejection.
 * - infrastructure: the gateway gave up on the policy server, a policy call hung past its request
 *   timeout, the policy server refused us (401/403/404), no model call succeeded before the task
 *   timeout, or OpenCode failed before its first step.
 */
import type { StopReason } from '../../../shared/agent.ts';
import type { GatewayCall, GatewayStats } from '../gateway/policy-gateway.ts';
import { describeFailures } from '../gateway/health.ts';
import type { SessionEventLog } from './events.ts';

export type Outcome = { kind: 'result'; stopReason: StopReason; error?: string } | { kind: 'infra'; message: string };

export interface OutcomeInput {
  log: Pick<SessionEventLog, 'errors' | 'lastBoxStep' | 'lastLengthStep' | 'stepStarts' | 'toolCalls'>;
  exec: { exitCode: number | null; signal: string | null; timedOut: boolean; stderr: string };
  /** Why the runner stopped the session itself, if it did. */
  stoppedBy: { kind: 'tool_cap'; message: string } | { kind: 'upstream'; message: string } | null;
  gateway: { stats: GatewayStats; calls: readonly GatewayCall[] };
}

const INFRA_STATUSES = new Set([401, 403, 404, 407]);

function tail(text: string, chars = 500): string {
  const t = text.trim();
  return t.length > chars ? `...${t.slice(-chars)}` : t;
}

export function decideOutcome(input: OutcomeInput): Outcome {
  const { log, exec, stoppedBy, gateway } = input;
  const { stats, calls } = gateway;
  if (stoppedBy?.kind === 'upstream') return { kind: 'infra', message: stoppedBy.message };

  if (exec.timedOut) {
    if (stats.successes === 0) {
      const why = stats.calls === 0 && calls.length === 0 ? 'OpenCode made no model call' : describeFailures(stats);
      return { kind: 'infra', message: `no policy call succeeded before the task timeout (${why})` };
    }
    return { kind: 'result', stopReason: 'timeout', error: 'the task timeout was reached before the session ended' };
  }
  if (stoppedBy?.kind === 'tool_cap') return { kind: 'result', stopReason: 'timeout', error: stoppedBy.message };

  for (const err of log.errors) {
    if (err.name === 'ContextOverflowError') return { kind: 'result', stopReason: 'context_limit', error: err.message };
  }
  const first = log.errors[0];
  if (first) {
    const hung = calls.some((c) => c.clientAborted && c.status === null);
    if (hung && /timed? ?out|timeout|aborted/i.test(first.message)) {
      return { kind: 'infra', message: `a policy call got no answer within the request timeout (${first.name}: ${first.message})` };
    }
    if (first.statusCode !== undefined && INFRA_STATUSES.has(first.statusCode)) {
      return { kind: 'infra', message: `the policy server refused the call (${first.statusCode}: ${first.message})` };
    }
    return { kind: 'result', stopReason: 'agent_error', error: `${first.name}: ${first.message}` };
  }
  if (exec.exitCode !== 0) {
    const how = exec.exitCode === null ? `signal ${exec.signal}` : `exit code ${exec.exitCode}`;
    if (log.stepStarts === 0) return { kind: 'infra', message: `OpenCode failed before its first step (${how}): ${tail(exec.stderr)}` };
    return { kind: 'result', stopReason: 'agent_error', error: `OpenCode ended with ${how}: ${tail(exec.stderr)}` };
  }
  const rejected = log.toolCalls.find((t) => t.status === 'error' && /rejected permission/i.test(t.error ?? ''));
  if (rejected || /auto-rejecting/.test(exec.stderr)) {
    return { kind: 'result', stopReason: 'agent_error', error: `a permission request was auto-rejected (tool ${rejected?.tool ?? 'unknown'}), which ends a headless session` };
  }
  if (log.lastLengthStep >= 0 && log.lastLengthStep > log.lastBoxStep) {
    return { kind: 'result', stopReason: 'output_cap', error: 'a model call hit the output token cap before an answer' };
  }
  if (log.lastBoxStep >= 0) return { kind: 'result', stopReason: 'answered' };
  return { kind: 'result', stopReason: 'no_answer' };
}
