/**
 * How a rollout ended, decided only from facts the model cannot forge: what the policy gateway saw
 * of the policy server (statuses, connections, the assistant text of each answer, finish reasons),
 * the runner's own clocks and the exit status of the process it started, and the kernel's counts of
 * the sandbox's limit hits. Nothing the sandbox can print (OpenCode's event stream, stderr) changes
 * the answer, the stop reason or masking; stderr appears only as text inside an error message.
 *
 * - infra (masked after its retries): the policy server refused us (401/403/404/407), failed every
 *   call or kept failing until the gateway gave up, refused the very first call, or OpenCode made no
 *   policy call at all (the model never got to act).
 * - timeout (0, no judge call): the task budget ran out after the model acted, the policy server
 *   accepted a call and never answered, or a harness budget (tool calls, policy calls) was spent.
 * - context_limit: the policy server refused a call for its context length.
 * - agent_error: OpenCode ended abnormally after the model acted (killed, a limit of its box, a
 *   rejected call), named in `error`.
 * - output_cap / answered / no_answer: from the finish reasons and the answer extracted from the
 *   answers' text (shared/scoring/answer.ts: an `Answer:` line, else a `\boxed{}`).
 */
import type { StopReason } from '../shared/ports/agent.ts';
import { extractAnswer, responseText } from '../shared/scoring/answer.ts';
import { isAnswered, isServerFailure, type GatewayCall, type GatewayStats } from '../gateway/index.ts';
import { describeFailures } from './upstream-give-up.ts';

export type StopCause =
  | { kind: 'upstream'; message: string }
  | { kind: 'tool_cap'; message: string }
  | { kind: 'call_cap'; message: string }
  /** The model's clock ran out (the task timeout, less the time its calls were held). */
  | { kind: 'task_timeout'; message: string }
  /** The agent's calls were held past `policy.max_wait_s` (the rollout goes back to the queue). */
  | { kind: 'policy_wait'; message: string }
  /** The policy server said the key's quota is gone (`insufficient_quota`). */
  | { kind: 'quota'; message: string };

export type SessionEnd =
  | { kind: 'result'; stopReason: StopReason; responseText: string; extractedAnswer: string | null; error: string | null }
  /** `policy`: the policy server's doing (a run pauses on it); else the harness's. */
  | { kind: 'infra'; message: string; policy: boolean; quota?: boolean };

export interface SessionFacts {
  /** The forwarded calls, in the order they were sent. */
  calls: readonly GatewayCall[];
  stats: GatewayStats;
  /** How the OpenCode process ended, as the runner saw it. */
  exec: { exitCode: number | null; signal: string | null; timedOut: boolean };
  /** Why the runner stopped the session itself, if it did. */
  stoppedBy: StopCause | null;
  /** A limit of the sandbox that was hit ("the sandbox hit its 2048 MiB memory limit"), or null. */
  limitHit: string | null;
  /** The policy endpoint (credentials removed), for messages. */
  policyUrl: string;
  taskTimeoutS: number;
  requestTimeoutS: number;
  /** OpenCode's stderr (untrusted): quoted in messages only. */
  stderrTail: string;
}

/** Statuses that mean the policy server will not serve us at all (key, model, path, proxy). */
const REFUSED_STATUSES = new Set([401, 403, 404, 407]);
const CONTEXT_OVERFLOW = /context[ _]length|maximum context|context window|too many tokens|prompt is too long/i;

function quote(text: string, chars = 300): string {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length > chars ? `...${t.slice(-chars)}` : t;
}

function statusText(call: GatewayCall): string {
  return `HTTP ${call.status}${call.response.errorMessage ? `: ${quote(call.response.errorMessage, 200)}` : ''}`;
}

function isContextOverflow(call: GatewayCall): boolean {
  if (call.status !== 400) return false;
  return call.response.errorCode === 'context_length_exceeded' || CONTEXT_OVERFLOW.test(call.response.errorMessage ?? '');
}

/** Accepted by the policy server (a connection was open) and never answered. */
function isHung(call: GatewayCall): boolean {
  return call.connected && call.status === null && (call.clientAborted === true || call.upstreamErrorKind === 'timeout');
}

function how(exec: SessionFacts['exec']): string {
  return exec.exitCode === null ? `signal ${exec.signal}` : `exit code ${exec.exitCode}`;
}

const result = (stopReason: StopReason, text: string, error: string | null, answer: string | null = null): SessionEnd => ({
  kind: 'result', stopReason, responseText: text, extractedAnswer: answer, error,
});

/** Before the model's first answer: every way it ends is the harness's or the server's, but a hang. */
function beforeFirstAnswer(input: SessionFacts): SessionEnd {
  const { calls, exec, policyUrl } = input;
  if (calls.length === 0) {
    if (input.limitHit) return { kind: 'infra', message: `OpenCode could not start within the sandbox's limits: ${input.limitHit}`, policy: false };
    if (exec.timedOut) return { kind: 'infra', message: `OpenCode made no policy call before the task timeout (${input.taskTimeoutS} s)`, policy: false };
    return { kind: 'infra', message: `OpenCode ended before its first policy call (${how(exec)}): ${quote(input.stderrTail) || 'no output'}`, policy: false };
  }
  const hung = calls.filter(isHung);
  if (hung.length > 0 && (exec.timedOut || hung.length === calls.length)) {
    const when = exec.timedOut ? `before the task timeout (${input.taskTimeoutS} s)` : `within policy.request_timeout_s (${input.requestTimeoutS} s)`;
    return result('timeout', '', `the policy server at ${policyUrl} accepted ${hung.length} call(s) and answered none ${when}`);
  }
  const first = calls[0];
  if (isContextOverflow(first)) return result('context_limit', '', `the first call is over the context window (${statusText(first)})`);
  if (calls.every(isServerFailure)) {
    return { kind: 'infra', message: `the policy server at ${policyUrl} failed all ${calls.length} call(s) (${describeFailures(input.stats)})`, policy: true };
  }
  const refused = calls.find((c) => c.status !== null && c.status >= 400) ?? first;
  return { kind: 'infra', message: `the policy server at ${policyUrl} did not answer the first call (${refused.status === null ? refused.upstreamError ?? 'no answer' : statusText(refused)})`, policy: true };
}

/**
 * The response text of the answered calls (every assistant text, the text beside tool calls too, in
 * order, joined by a newline, trimmed) and its answer by the one rule of shared/scoring/answer.ts, with the
 * index of the answer (call) it lies in (-1 when none).
 */
export function sessionAnswer(answered: readonly Pick<GatewayCall, 'response'>[]): { text: string; answer: string | null; index: number } {
  const parts = answered.map((c) => c.response.text);
  const final = extractAnswer(parts);
  return { text: responseText(parts), answer: final?.answer ?? null, index: final?.part ?? -1 };
}

/**
 * After the model acted: it may have caused anything from here on, so nothing is masked here (an
 * infrastructure end still needs the gateway's own probe of the server, rollout-session.ts). The
 * answer follows the one rule of shared/scoring/answer.ts, for the stop reason and the extraction alike.
 */
function afterAnswers(input: SessionFacts, answered: readonly GatewayCall[]): SessionEnd {
  const { calls, exec, stoppedBy } = input;
  const final = sessionAnswer(answered);
  const { text, answer } = final;
  if (exec.timedOut) return result('timeout', text, `the task timeout (${input.taskTimeoutS} s) was reached before the session ended`, answer);
  if (stoppedBy) return result('timeout', text, stoppedBy.message, answer);
  const last = calls[calls.length - 1];
  if (isContextOverflow(last)) return result('context_limit', text, `a call went over the context window (${statusText(last)})`, answer);
  if (isHung(last)) return result('timeout', text, `the policy server at ${input.policyUrl} did not answer a call within policy.request_timeout_s (${input.requestTimeoutS} s)`, answer);
  if (exec.exitCode !== 0) {
    if (input.limitHit) return result('agent_error', text, `${input.limitHit}; OpenCode ended with ${how(exec)}`, answer);
    const rejected = last.status !== null && last.status >= 400 && last.status < 500 ? `; the last call was rejected (${statusText(last)})` : '';
    return result('agent_error', text, `OpenCode ended with ${how(exec)}${rejected}: ${quote(input.stderrTail) || 'no output'}`, answer);
  }
  const lastLength = answered.findLastIndex((c) => c.response.finishReason === 'length');
  if (lastLength > final.index) return result('output_cap', text, 'a model call hit the output token cap before an answer', answer);
  if (answer !== null) return result('answered', text, null, answer);
  return result('no_answer', text, null);
}

export function decideSessionEnd(input: SessionFacts): SessionEnd {
  const { calls, stoppedBy, policyUrl } = input;
  if (stoppedBy?.kind === 'upstream') return { kind: 'infra', message: stoppedBy.message, policy: true };
  const refused = calls.find((c) => c.status !== null && REFUSED_STATUSES.has(c.status));
  if (refused) return { kind: 'infra', message: `the policy server at ${policyUrl} refused a call (${statusText(refused)}): check POLICY_BASE_URL, POLICY_API_KEY and POLICY_MODEL`, policy: true };
  const answered = calls.filter(isAnswered);
  if (answered.length === 0) return beforeFirstAnswer(input);
  return afterAnswers(input, answered);
}
