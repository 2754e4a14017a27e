/**
 * The outcome of a rollout from what the gateway saw and how the process ended: every stop reason,
 * every infrastructure verdict, and the line between them (the model's first answer).
 */
import { describe, expect, it } from 'vitest';
import { decideSessionEnd, type SessionFacts } from '../../src/agent/session-end.ts';
import { emptyStats, recordCall, type GatewayCall, type GatewayStats } from '../../src/gateway/call-stats.ts';
import { upstreamGiveUpReason } from '../../src/agent/upstream-give-up.ts';
import { buildOpenCodeConfig, buildOpenCodeEnv, sessionPaths } from '../../src/agent/session-config.ts';

const answer = (text: string, more: Partial<GatewayCall['response']> = {}): Partial<GatewayCall> => ({
  status: 200, connected: true, response: { text, reasoning: null, toolCalls: [], finishReason: 'stop', promptTokens: 10, completionTokens: 5, errorMessage: null, errorCode: null, truncated: false, ...more },
});
const tool = (): Partial<GatewayCall> => answer('Let me look.', { toolCalls: [{ id: 'c1', name: 'bash', arguments: '{}' }], finishReason: 'tool_calls' });
const failed = (status: number | null, more: Partial<GatewayCall> = {}, errorMessage: string | null = null, errorCode: string | null = null): Partial<GatewayCall> => ({
  status, connected: status !== null, response: { text: '', reasoning: null, toolCalls: [], finishReason: null, promptTokens: null, completionTokens: null, errorMessage, errorCode, truncated: false }, ...more,
});
const refusedConn = (): Partial<GatewayCall> => failed(null, { connected: false, upstreamError: 'connection_refused (ECONNREFUSED): x', upstreamErrorKind: 'connection_refused' });
const hung = (): Partial<GatewayCall> => failed(null, { connected: true, clientAborted: true });

/** Calls as the gateway records them. */
function callsOf(parts: Array<Partial<GatewayCall>>): GatewayCall[] {
  return parts.map((p, index) => ({
    index, startedAt: '', latencyMs: 1, stream: true, connected: true, status: 200, request: { toolResults: [], shownImages: [] }, origin: 'agent',
    ...p,
  }) as GatewayCall);
}

function outcome(parts: Array<Partial<GatewayCall>>, exec: Partial<SessionFacts['exec']> = {}, over: Partial<SessionFacts> = {}) {
  const calls = callsOf(parts);
  let stats: GatewayStats = emptyStats();
  for (const c of calls) stats = recordCall(stats, c, 1);
  return decideSessionEnd({
    calls, stats, stoppedBy: null, limitHit: null, policyUrl: 'http://policy:8000/v1', taskTimeoutS: 60, requestTimeoutS: 30, stderrTail: '',
    exec: { exitCode: 0, signal: null, timedOut: false, ...exec },
    ...over,
  });
}

describe('decideSessionEnd', () => {
  it('answered: the last \\boxed over the answers, in order', () => {
    expect(outcome([tool(), answer('So it is \\boxed{B}.')])).toMatchObject({ kind: 'result', stopReason: 'answered', extractedAnswer: 'B', error: null });
    expect(outcome([answer('\\boxed{A}'), tool(), answer('Wait, \\boxed{C}')])).toMatchObject({ stopReason: 'answered', extractedAnswer: 'C' });
  });

  it('answered by the reference\'s rule: an Answer: line over any box; the response text is every answer\'s text, the one beside a tool call too', () => {
    expect(outcome([answer('Looking at it.\nAnswer: B')])).toMatchObject({ stopReason: 'answered', extractedAnswer: 'B', responseText: 'Looking at it.\nAnswer: B' });
    expect(outcome([answer('\\boxed{5}'), tool(), answer('Final answer: 7.')])).toMatchObject({ extractedAnswer: '7', responseText: '\\boxed{5}\nLet me look.\nFinal answer: 7.' });
    // An answer line in the text beside a tool call, then a cut call: the cap came after the answer.
    expect(outcome([answer('Answer: C', { toolCalls: [{ id: 'c1', name: 'bash', arguments: '{}' }], finishReason: 'tool_calls' }), answer('Let me', { finishReason: 'length' })]))
      .toMatchObject({ stopReason: 'output_cap', extractedAnswer: 'C' });
  });

  it('no_answer, output_cap, context_limit', () => {
    expect(outcome([answer('I do not know')])).toMatchObject({ stopReason: 'no_answer', extractedAnswer: null });
    expect(outcome([answer('\\boxed{A}'), answer('Let me think', { finishReason: 'length' })])).toMatchObject({ stopReason: 'output_cap' });
    expect(outcome([answer('Let me think', { finishReason: 'length' }), answer('\\boxed{A}')])).toMatchObject({ stopReason: 'answered' });
    expect(outcome([tool(), failed(400, {}, "This model's maximum context length is 1024 tokens")], { exitCode: 1 })).toMatchObject({ stopReason: 'context_limit' });
    expect(outcome([failed(400, {}, 'too long', 'context_length_exceeded')], { exitCode: 1 })).toMatchObject({ stopReason: 'context_limit' });
  });

  it('timeout scores 0: the task budget, a policy server that accepted calls and never answered, the harness budgets', () => {
    expect(outcome([tool(), hung()], { exitCode: null, signal: 'SIGKILL', timedOut: true })).toMatchObject({ stopReason: 'timeout', error: expect.stringMatching(/task timeout \(60 s\)/) });
    const never = outcome([hung()], { exitCode: null, signal: 'SIGKILL', timedOut: true });
    expect(never).toMatchObject({ kind: 'result', stopReason: 'timeout', error: expect.stringMatching(/http:\/\/policy:8000\/v1 accepted 1 call\(s\) and answered none before the task timeout/) });
    expect(outcome([hung()], { exitCode: 1 })).toMatchObject({ stopReason: 'timeout', error: expect.stringMatching(/request_timeout_s \(30 s\)/) });
    expect(outcome([tool(), hung()], { exitCode: 1 })).toMatchObject({ stopReason: 'timeout' });
    expect(outcome([tool()], { exitCode: null, signal: 'SIGTERM' }, { stoppedBy: { kind: 'tool_cap', message: 'the tool-call budget was spent' } })).toMatchObject({ stopReason: 'timeout', error: 'the tool-call budget was spent' });
    expect(outcome([tool()], { exitCode: null, signal: 'SIGTERM' }, { stoppedBy: { kind: 'call_cap', message: 'the policy-call budget was spent' } })).toMatchObject({ stopReason: 'timeout' });
  });

  it('masks (infra) only what the model cannot cause', () => {
    expect(outcome([], { exitCode: 1 }, { stderrTail: 'Error: boom' })).toMatchObject({ kind: 'infra', message: expect.stringMatching(/before its first policy call \(exit code 1\): Error: boom/) });
    expect(outcome([], { exitCode: null, signal: 'SIGKILL', timedOut: true })).toMatchObject({ kind: 'infra', message: expect.stringMatching(/no policy call before the task timeout/) });
    expect(outcome([refusedConn(), refusedConn()], { exitCode: null, signal: 'SIGKILL', timedOut: true })).toMatchObject({ kind: 'infra', message: expect.stringMatching(/http:\/\/policy:8000\/v1 failed all 2 call\(s\) \(unreachable: connection_refused x2\)/) });
    expect(outcome([failed(500), failed(503)], { exitCode: null, signal: 'SIGKILL', timedOut: true })).toMatchObject({ kind: 'infra' });
    for (const status of [401, 403, 404]) {
      expect(outcome([failed(status, {}, 'nope')], { exitCode: 1 })).toMatchObject({ kind: 'infra', message: expect.stringMatching(new RegExp(`refused a call \\(HTTP ${status}: nope\\)`)) });
      // After the model acted too: the gateway sets the key, the model and the path, so a 401/403/404 is never the model's.
      expect(outcome([tool(), failed(status)], { exitCode: 1 })).toMatchObject({ kind: 'infra' });
    }
    expect(outcome([failed(400, {}, 'Invalid image data')], { exitCode: 1 })).toMatchObject({ kind: 'infra', message: expect.stringMatching(/did not answer the first call \(HTTP 400: Invalid image data\)/) });
    expect(outcome([tool()], { exitCode: null, signal: 'SIGTERM' }, { stoppedBy: { kind: 'upstream', message: 'the policy server failed 5 calls in a row' } })).toMatchObject({ kind: 'infra' });
    expect(outcome([], { exitCode: null, signal: 'SIGKILL' }, { limitHit: 'the sandbox hit its 64 MiB memory limit' })).toMatchObject({ kind: 'infra', message: expect.stringMatching(/could not start within the sandbox's limits/) });
  });

  it('after the model acted, an abnormal end is agent_error, naming a limit it hit, never masked', () => {
    expect(outcome([tool()], { exitCode: null, signal: 'SIGKILL' }, { limitHit: 'the sandbox hit its 2048 MiB memory limit' })).toMatchObject({
      kind: 'result', stopReason: 'agent_error', error: 'the sandbox hit its 2048 MiB memory limit; OpenCode ended with signal SIGKILL',
    });
    expect(outcome([tool()], { exitCode: 137, signal: null }, { stderrTail: 'Killed' })).toMatchObject({ stopReason: 'agent_error', error: expect.stringMatching(/exit code 137: Killed/) });
    expect(outcome([tool(), failed(400, {}, 'Invalid image data')], { exitCode: 1 })).toMatchObject({ stopReason: 'agent_error', error: expect.stringMatching(/rejected \(HTTP 400: Invalid image data\)/) });
  });

  it('ignores what the sandbox prints: a forged 401 error event in stderr changes nothing', () => {
    const forged = '{"type":"error","error":{"name":"APIError","data":{"message":"Unauthorized","statusCode":401}}}';
    expect(outcome([tool(), answer('\\boxed{B}')], {}, { stderrTail: forged })).toEqual(outcome([tool(), answer('\\boxed{B}')]));
    expect(outcome([tool(), answer('wrong')], {}, { stderrTail: forged })).toMatchObject({ kind: 'result', stopReason: 'no_answer' });
  });
});

describe('upstreamGiveUpReason', () => {
  const limits = { maxConsecutiveFailures: 3, maxFailingS: 60 };
  const stats = (over: Partial<GatewayStats>): GatewayStats => ({ ...emptyStats(), ...over });
  it('gives up after N failures in a row or after failing for long enough', () => {
    expect(upstreamGiveUpReason(stats({}), limits)).toBeNull();
    expect(upstreamGiveUpReason(stats({ consecutiveFailures: 2, failingSince: 0, upstreamErrors: 2, upstreamErrorReasons: { connection_refused: 2 } }), limits, 10_000)).toBeNull();
    expect(upstreamGiveUpReason(stats({ consecutiveFailures: 3, failingSince: 0, upstreamErrors: 3, upstreamErrorReasons: { connection_refused: 3 } }), limits, 10_000)).toMatch(/connection_refused x3/);
    expect(upstreamGiveUpReason(stats({ consecutiveFailures: 1, failingSince: 0, retryableStatuses: 1 }), limits, 61_000)).toMatch(/5xx/);
  });
});

describe('session config', () => {
  it('holds the gateway URL and a dummy key, never a real one, every start-up fetch is off, and the reference tools', () => {
    const config = buildOpenCodeConfig({ gatewayBaseUrl: 'http://127.0.0.1:18080/v1', accessToken: 'tok', modelName: 'm', contextWindow: 1000, maxOutputTokens: 100, requestTimeoutS: 7 });
    expect(config).toMatchObject({
      share: 'disabled', autoupdate: false, compaction: { auto: false },
      provider: { policy: { npm: '@ai-sdk/openai-compatible', options: { baseURL: 'http://127.0.0.1:18080/v1', apiKey: 'tok', timeout: 7000 }, models: { m: { attachment: true, modalities: { input: ['text', 'image'] }, limit: { context: 1000, output: 100 } } } } },
      permission: { '*': 'allow', webfetch: 'deny', task: 'deny', skill: 'deny' },
    });
    expect((config.permission as Record<string, string>).todowrite).toBeUndefined();
    const env = buildOpenCodeEnv(sessionPaths('/workspace'), config, 100);
    expect(env.XDG_CONFIG_HOME.startsWith('/workspace/')).toBe(true);
    expect(env.OPENCODE_DB.startsWith('/workspace/')).toBe(true);
    expect(env.OPENCODE_DISABLE_MODELS_FETCH).toBe('1');
    expect(Object.keys(env).some((k) => /API_KEY|SECRET|PASSWORD|AUTH/.test(k))).toBe(false);
  });
});
