import { describe, expect, it } from 'vitest';
import { SessionEventLog } from '../../src/workers/sandbox/opencode/events.ts';
import { decideOutcome, type OutcomeInput } from '../../src/workers/sandbox/opencode/outcome.ts';
import type { GatewayCall, GatewayStats } from '../../src/workers/sandbox/gateway/policy-gateway.ts';
import { upstreamGiveUpReason } from '../../src/workers/sandbox/gateway/health.ts';
import { buildOpenCodeConfig, buildOpenCodeEnv, sessionPaths } from '../../src/workers/sandbox/opencode/session-config.ts';

const ev = (type: string, part: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ type, timestamp: 1, sessionID: 'ses_1', part, ...extra });
const stepStart = () => ev('step_start', { type: 'step-start' });
const text = (t: string) => ev('text', { type: 'text', text: t });
const stepFinish = (reason: string, input = 100, output = 10) =>
  ev('step_finish', { type: 'step-finish', reason, tokens: { total: input + output, input, output, reasoning: 1, cache: { read: 5, write: 0 } } });
const tool = (name: string, status = 'completed', more: Record<string, unknown> = {}) =>
  ev('tool_use', { type: 'tool', tool: name, callID: 'c1', state: { status, input: { filePath: 'puzzle.png' }, output: 'ok', time: { start: 1, end: 4 }, ...more } });

function logOf(lines: string[]): SessionEventLog {
  const log = new SessionEventLog();
  for (const l of lines) log.push(l);
  return log;
}

const okStats = (over: Partial<GatewayStats> = {}): GatewayStats => ({
  calls: 1, successes: 1, upstreamErrors: 0, upstreamErrorReasons: {}, retryableStatuses: 0,
  consecutiveFailures: 0, failingSince: null, lastSuccessAt: 1, promptTokens: 0, completionTokens: 0, ...over,
});

function outcome(lines: string[], over: Partial<OutcomeInput> = {}, exec: Partial<OutcomeInput['exec']> = {}, calls: GatewayCall[] = []) {
  return decideOutcome({
    log: logOf(lines),
    exec: { exitCode: 0, signal: null, timedOut: false, stderr: '', ...exec },
    stoppedBy: null,
    gateway: { stats: okStats(), calls },
    ...over,
  });
}

describe('SessionEventLog', () => {
  it('collects texts, tool calls, steps and tokens, and hides image data', () => {
    const image = `data:image/png;base64,${'iVBORw0KGgo'.repeat(20)}`;
    const log = logOf([
      stepStart(), tool('read', 'completed', { attachments: [{ url: image }] }), stepFinish('tool-calls'),
      'not json', stepStart(), text('It is \\boxed{B}'), stepFinish('stop', 200, 20),
    ]);
    expect(log.sessionId).toBe('ses_1');
    expect(log.turns()).toBe(2);
    expect(log.responseText()).toBe('It is \\boxed{B}');
    expect(log.toolCalls).toMatchObject([{ tool: 'read', status: 'completed', output: 'ok', step: 0, durationMs: 3 }]);
    expect(log.tokenTotals()).toEqual({ inputTokens: 310, outputTokens: 32 });
    expect(log.lastBoxStep).toBe(1);
    expect(log.badLines).toEqual(['not json']);
    expect(JSON.stringify(log.events)).not.toContain('base64');
    expect(JSON.stringify(log.events)).toMatch(/<image sha256=/);
  });
});

describe('decideOutcome', () => {
  it('answered, no_answer', () => {
    expect(outcome([stepStart(), text('\\boxed{A}'), stepFinish('stop')])).toEqual({ kind: 'result', stopReason: 'answered' });
    expect(outcome([stepStart(), text('maybe A'), stepFinish('stop')])).toMatchObject({ stopReason: 'no_answer' });
  });
  it('output_cap only when no answer came in or after the cut step', () => {
    expect(outcome([stepStart(), text('thinking'), stepFinish('length')])).toMatchObject({ stopReason: 'output_cap' });
    expect(outcome([stepStart(), text('\\boxed{A}'), stepFinish('stop'), stepStart(), text('more'), stepFinish('length')])).toMatchObject({ stopReason: 'output_cap' });
    expect(outcome([stepStart(), text('so \\boxed{A} and'), stepFinish('length')])).toMatchObject({ stopReason: 'answered' });
    expect(outcome([stepStart(), text('x'), stepFinish('length'), stepStart(), text('\\boxed{C}'), stepFinish('stop')])).toMatchObject({ stopReason: 'answered' });
  });
  it('error events: context_limit, agent_error, and infrastructure statuses', () => {
    const err = (name: string, message: string, statusCode?: number) => JSON.stringify({ type: 'error', error: { name, data: { message, statusCode } } });
    expect(outcome([stepStart(), err('ContextOverflowError', 'too long')], {}, { exitCode: 1 })).toMatchObject({ stopReason: 'context_limit' });
    expect(outcome([stepStart(), err('APIError', 'Invalid image data', 400)], {}, { exitCode: 1 })).toMatchObject({ stopReason: 'agent_error', error: 'APIError: Invalid image data' });
    expect(outcome([stepStart(), err('APIError', 'Unauthorized', 401)], {}, { exitCode: 1 })).toMatchObject({ kind: 'infra' });
    const hung: GatewayCall = { index: 0, method: 'POST', path: '/v1/chat/completions', startedAt: '', status: null, latencyMs: 5000, stream: true, promptTokens: null, completionTokens: null, finishReason: null, clientAborted: true };
    expect(outcome([stepStart(), err('UnknownError', 'The operation timed out.')], {}, { exitCode: 1 }, [hung])).toMatchObject({ kind: 'infra' });
  });
  it('a permission auto-rejection and a crash mid-session are agent_error; a crash before any step is infrastructure', () => {
    expect(outcome([stepStart(), tool('read', 'error', { error: 'The user rejected permission to use this specific tool call.' }), stepFinish('tool-calls')])).toMatchObject({ stopReason: 'agent_error' });
    expect(outcome([stepStart()], {}, { exitCode: 134, stderr: 'boom' })).toMatchObject({ stopReason: 'agent_error' });
    expect(outcome([], {}, { exitCode: 1, stderr: 'Error: Configuration is invalid' })).toMatchObject({ kind: 'infra', message: expect.stringMatching(/before its first step.*Configuration/) });
  });
  it('timeouts: after a successful call it is the model budget; with no successful call it is infrastructure', () => {
    expect(outcome([stepStart()], {}, { timedOut: true, exitCode: null, signal: 'SIGTERM' })).toMatchObject({ stopReason: 'timeout' });
    const failing = okStats({ successes: 0, calls: 4, retryableStatuses: 4, consecutiveFailures: 4, failingSince: 1 });
    expect(outcome([], { gateway: { stats: failing, calls: [] } }, { timedOut: true, exitCode: null })).toMatchObject({ kind: 'infra', message: expect.stringMatching(/no policy call succeeded/) });
  });
  it('stops decided by the runner', () => {
    expect(outcome([stepStart(), text('\\boxed{A}')], { stoppedBy: { kind: 'tool_cap', message: 'budget' } }, { exitCode: null })).toEqual({ kind: 'result', stopReason: 'timeout', error: 'budget' });
    expect(outcome([], { stoppedBy: { kind: 'upstream', message: 'down' } }, { exitCode: null })).toEqual({ kind: 'infra', message: 'down' });
  });
});

describe('upstreamGiveUpReason', () => {
  it('gives up after N failures in a row or after failing for long enough', () => {
    const limits = { maxConsecutiveFailures: 3, maxFailingS: 60 };
    expect(upstreamGiveUpReason(okStats(), limits)).toBeNull();
    expect(upstreamGiveUpReason(okStats({ consecutiveFailures: 2, failingSince: 0, upstreamErrors: 2, upstreamErrorReasons: { connection_refused: 2 } }), limits, 10_000)).toBeNull();
    expect(upstreamGiveUpReason(okStats({ consecutiveFailures: 3, failingSince: 0, upstreamErrors: 3, upstreamErrorReasons: { connection_refused: 3 } }), limits, 10_000)).toMatch(/connection_refused x3/);
    expect(upstreamGiveUpReason(okStats({ consecutiveFailures: 1, failingSince: 0, retryableStatuses: 1 }), limits, 61_000)).toMatch(/5xx/);
  });
});

describe('session config', () => {
  it('holds the gateway URL and a dummy key, never a real one, and every start-up fetch is off', () => {
    const config = buildOpenCodeConfig({ gatewayBaseUrl: 'http://127.0.0.1:18080/v1', accessToken: 'tok', modelName: 'm', contextWindow: 1000, maxOutputTokens: 100, requestTimeoutS: 7 });
    expect(config).toMatchObject({
      share: 'disabled', autoupdate: false, compaction: { auto: false },
      provider: { policy: { npm: '@ai-sdk/openai-compatible', options: { baseURL: 'http://127.0.0.1:18080/v1', apiKey: 'tok', timeout: 7000 }, models: { m: { attachment: true, modalities: { input: ['text', 'image'] }, limit: { context: 1000, output: 100 } } } } },
    });
    const env = buildOpenCodeEnv(sessionPaths('/workspace'), config, 100);
    expect(env.XDG_CONFIG_HOME.startsWith('/workspace/')).toBe(true);
    expect(env.OPENCODE_DB.startsWith('/workspace/')).toBe(true);
    expect(env.OPENCODE_DISABLE_MODELS_FETCH).toBe('1');
    expect(Object.keys(env).some((k) => /API_KEY|SECRET|PASSWORD|AUTH/.test(k))).toBe(false);
  });
});
