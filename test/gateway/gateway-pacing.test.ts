/**
 * Back-pressure is a wait, not a failure: the gateway holds the agent's calls on a real scripted
 * server's 429s and 503s with Retry-After (never counting them against the server), passes the
 * model's own calls' 429s on unheld, says when the quota is gone, bounds the wait, and sends a call
 * again on a fresh connection when a pooled one the server had closed fails. The pure rules too.
 */
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startPolicyGateway, type PolicyGateway, type PolicyGatewayOptions } from '../../src/gateway/index.ts';
import type { PolicySettings } from '../../src/shared/config/run-settings.ts';
import { rolloutPolicy } from '../helpers/policy.ts';
import { askedWaitMs, holdDelayMs, isBackpressure, isQuotaGone } from '../../src/pacing/backpressure.ts';
import { WaitClock } from '../../src/pacing/held-calls.ts';
import { upstreamGiveUpReason } from '../../src/agent/upstream-give-up.ts';
import { AdaptiveConcurrency } from '../../src/pacing/adaptive-concurrency.ts';
import { ModelClock } from '../../src/agent/model-clock.ts';
import { scripts, startScriptedPolicyServer, type ScriptedPolicyServer, type ScriptReply } from '../helpers/scripted-policy-server.ts';
import { waitFor } from '../helpers/wait.ts';

const TOKEN = 'dummy-access-token';

function post(socketPath: string, body: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request({ socketPath, path: '/v1/chat/completions', method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

const chat = (content = 'hi') => ({ model: 'vlm', messages: [{ role: 'user', content }] });
const tooMany = (headers: Record<string, string>, body?: unknown): ScriptReply => ({ kind: 'error', status: 429, headers, body });

describe('held calls', () => {
  let dir: string;
  let server: ScriptedPolicyServer;
  let gateway: PolicyGateway | null = null;

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'gw-pace-'));
    server = await startScriptedPolicyServer({ script: scripts.answer('\\boxed{A}') });
  });
  afterEach(async () => {
    await gateway?.close();
    gateway = null;
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function open({ settings, ...extra }: Partial<Omit<PolicyGatewayOptions, 'policy'>> & { settings?: Partial<PolicySettings> } = {}, upstream = server.url): Promise<{ agent: string; other: string }> {
    gateway = await startPolicyGateway({
      policy: rolloutPolicy(upstream, { apiKey: 'sk-x', model: 'm', settings: { max_output_tokens: 100, max_request_mib: 1, max_calls_per_rollout: 100, ...settings } }),
      accessToken: TOKEN, imageBudgetBytes: 32 << 20, socketPath: path.join(dir, 'gw.sock'), agentSocketPath: path.join(dir, 'agent.sock'), ...extra,
    });
    return { agent: path.join(dir, 'agent.sock'), other: path.join(dir, 'gw.sock') };
  }

  it("holds the agent's 429s and 503-with-Retry-After, sends again, and never counts them as failures", async () => {
    const { agent } = await open();
    server.setScript((_b, i) => (i === 0 ? tooMany({ 'retry-after-ms': '80' }) : i === 1 ? { kind: 'error', status: 503, headers: { 'retry-after': '0' } } : { kind: 'text', text: '\\boxed{A}' }));
    const reply = await post(agent, chat());
    expect(reply.status).toBe(200);
    expect(server.requests).toHaveLength(3);
    expect(gateway!.calls).toHaveLength(1);
    expect(gateway!.stats()).toMatchObject({ heldAnswers: 2, calls: 1, answered: 1, retryableStatuses: 0, consecutiveFailures: 0 });
    expect(upstreamGiveUpReason(gateway!.stats(), { maxConsecutiveFailures: 1, maxFailingS: 0 })).toBeNull();
    expect(gateway!.policyWaitS()).toBeGreaterThanOrEqual(0.08);
  });

  it('holds them on the token-capture path too (asked upstream without streaming), and passes a spent quota on', async () => {
    const { agent } = await open({ settings: { token_capture: true } });
    server.setScript((_b, i) => (i === 0 ? tooMany({ 'retry-after-ms': '50' }) : i === 1 ? { kind: 'text', text: '\\boxed{A}' } : tooMany({}, { error: { message: 'You exceeded your current quota', type: 'insufficient_quota', code: 'insufficient_quota' } })));
    const reply = await post(agent, chat());
    expect(reply.status).toBe(200);
    expect(server.requests).toHaveLength(2);
    expect(server.requests.every((r) => r.body?.stream === false && r.body?.return_token_ids === true)).toBe(true);
    expect(gateway!.stats()).toMatchObject({ heldAnswers: 1, calls: 1, answered: 1, consecutiveFailures: 0 });
    expect(gateway!.tokenCapture!.calls).toHaveLength(1);
    const spent = await post(agent, chat('again'));
    expect(spent.status).toBe(429);
    expect(server.requests).toHaveLength(3);
  });

  it("passes the model's own calls' 429s on at once: they are never held (no wait is credited)", async () => {
    const { other } = await open();
    server.setScript(() => tooMany({ 'retry-after': '30' }));
    const reply = await post(other, chat('my own question'));
    expect(reply.status).toBe(429);
    expect(server.requests).toHaveLength(1);
    expect(gateway!.stats()).toMatchObject({ forgedCalls: 1, heldAnswers: 0 });
    expect(gateway!.policyWaitS()).toBe(0);
  });

  it('a 429 saying insufficient_quota is passed on and reported once, never held', async () => {
    const gone: string[] = [];
    const { agent } = await open({ onQuotaGone: (m) => gone.push(m) });
    server.setScript(() => tooMany({}, { error: { message: 'You exceeded your current quota', type: 'insufficient_quota', code: 'insufficient_quota' } }));
    expect((await post(agent, chat())).status).toBe(429);
    expect((await post(agent, chat())).status).toBe(429);
    expect(server.requests).toHaveLength(2);
    expect(gone).toEqual(['You exceeded your current quota']);
  });

  it('a wait past max_wait_s ends the hold, tells the session once, and answers the sandbox 503', async () => {
    const exceeded: number[] = [];
    const { agent } = await open({ maxWaitS: 1, onWaitExceeded: (s) => exceeded.push(s) });
    server.setScript(() => tooMany({ 'retry-after-ms': '300' }));
    const reply = await post(agent, chat());
    expect(reply.status).toBe(503);
    expect(JSON.parse(reply.text).error.type).toBe('policy_wait');
    expect(exceeded).toHaveLength(1);
    expect(gateway!.calls).toHaveLength(0);
    expect(gateway!.stats().consecutiveFailures).toBe(0);
  });

  it.each([
    ['streamed through', {}],
    ['with token capture (the whole answer read first)', { settings: { token_capture: true } }],
  ] as const)('a pooled connection the server closed is retried once on a fresh connection, not counted as a failure (%s)', async (_how, extra) => {
    // A server that drops every connection's second request unanswered (as keep-alive running out looks to the client).
    const seen = new WeakMap<object, number>();
    const closing = http.createServer((req, res) => {
      const n = (seen.get(req.socket) ?? 0) + 1;
      seen.set(req.socket, n);
      req.resume();
      if (n > 1) return void req.socket.destroy();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
      });
    });
    await new Promise<void>((r) => closing.listen(0, '127.0.0.1', r));
    try {
      const { agent } = await open({ ...extra }, `http://127.0.0.1:${(closing.address() as { port: number }).port}/v1`);
      expect((await post(agent, chat())).status).toBe(200);
      // The second call goes out on the first one's pooled connection, which the server drops.
      expect((await post(agent, chat())).status).toBe(200);
      expect(gateway!.stats()).toMatchObject({ calls: 2, answered: 2, upstreamErrors: 0, consecutiveFailures: 0, freshRetries: 1 });
      expect(gateway!.calls.map((c) => c.freshRetry === true)).toEqual([false, true]);
    } finally {
      await gateway?.close();
      gateway = null;
      closing.closeAllConnections();
      await new Promise((r) => closing.close(r));
    }
  });
});

describe('back-pressure rules', () => {
  it('tells back-pressure from failure and a spent quota from a busy server', () => {
    expect(isBackpressure(429, {})).toBe(true);
    expect(isBackpressure(503, { 'retry-after': '2' })).toBe(true);
    expect(isBackpressure(503, {})).toBe(false);
    expect(isBackpressure(500, { 'retry-after': '2' })).toBe(false);
    expect(isQuotaGone('insufficient_quota')).toBe(true);
    expect(isQuotaGone('rate_limit_exceeded')).toBe(false);
    expect(isQuotaGone(null)).toBe(false);
  });

  it('reads the asked wait (capped), jitters it upward, and backs off exponentially without one', () => {
    expect(askedWaitMs({ 'retry-after-ms': '250' })).toBe(250);
    expect(askedWaitMs({ 'retry-after': '2' })).toBe(2000);
    expect(askedWaitMs({ 'retry-after': '99999' })).toBe(60_000);
    expect(askedWaitMs({ 'retry-after': 'soon' })).toBeNull();
    expect(askedWaitMs({})).toBeNull();
    expect(holdDelayMs(1, 1000, () => 0)).toBe(1000);
    expect(holdDelayMs(1, 1000, () => 0.999)).toBeLessThanOrEqual(1200);
    expect(holdDelayMs(1, null, () => 1)).toBe(1000);
    expect(holdDelayMs(4, null, () => 1)).toBe(8000);
    expect(holdDelayMs(40, null, () => 1)).toBe(30_000);
  });

  it('counts overlapping waits once', () => {
    let now = 0;
    const clock = new WaitClock(() => now);
    clock.start();
    now = 100;
    clock.start();
    now = 150;
    clock.stop();
    now = 300;
    expect(clock.totalMs()).toBe(300);
    clock.stop();
    now = 1000;
    expect(clock.totalMs()).toBe(300);
  });

  it('adaptive concurrency: halves-ish on push-back at most once per cooldown, grows back one per limit clean calls, stays in [1, cap]', () => {
    let now = 0;
    const a = new AdaptiveConcurrency(8, () => now);
    expect(a.current).toBe(8);
    a.pushedBack();
    expect(a.current).toBe(6);
    a.pushedBack();
    expect(a.current).toBe(6);
    for (let i = 0; i < 20; i++) {
      now += 5_000;
      a.pushedBack();
    }
    expect(a.current).toBe(1);
    for (let i = 0; i < 200; i++) a.clean(100, 10);
    expect(a.current).toBe(8);
  });

  it('adaptive concurrency: latency per token far past the best seen is a push-back', () => {
    let now = 0;
    const a = new AdaptiveConcurrency(8, () => now);
    for (let i = 0; i < 10; i++) a.clean(100, 10);
    now += 10_000;
    for (let i = 0; i < 20; i++) a.clean(2000, 10);
    expect(a.current).toBeLessThan(8);
  });

  /**
   * A simulated endpoint: at `n` sessions it answers `rate[n]` output tokens/s, 20 tokens a call,
   * with latency per token `latency[n]`; sessions start one per 2 calls (the first wave ramps up)
   * and those started under a higher limit end one per 4 calls.
   * Returns the limits visited and the throughput share of the best level over the last half.
   */
  function simulate(rate: number[], latency: number[], cap: number, calls = 600): { visited: number[]; share: number; final: number } {
    let now = 0;
    const a = new AdaptiveConcurrency(cap, () => now);
    let running = 1;
    let drain = 0;
    let ramp = 0;
    const visited: number[] = [];
    let tokens = 0;
    let from = 0;
    for (let i = 0; i < calls; i++) {
      if (running > a.current && ++drain % 4 === 0) running--;
      if (running < a.current && ++ramp % 2 === 0) running++;
      now += (20 / rate[running]) * 1000;
      if (i === calls / 2) [tokens, from] = [0, now];
      tokens += 20;
      a.clean(latency[running] * 20, 20, running);
      if (visited.at(-1) !== a.current) visited.push(a.current);
    }
    return { visited, share: (tokens * 1000) / (now - from) / Math.max(...rate.slice(1, cap + 1)), final: a.current };
  }

  it('adaptive concurrency: a saturated server whose throughput needs the sessions keeps them (latency rises, fewer sessions would idle it)', () => {
    // Processor sharing with tool time between calls: latency grows with sessions, throughput too until 4.
    const r = simulate([0, 40, 70, 88, 100], [0, 10, 20, 30, 40], 4);
    expect(r.share, JSON.stringify(r)).toBeGreaterThanOrEqual(0.9);
    expect(r.final).toBe(4);
    expect(Math.min(...r.visited)).toBeGreaterThanOrEqual(3); // it looked one step down, found it slower, came back
  });

  it('adaptive concurrency: a server whose throughput is flat past 2 sessions is given fewer sessions (latency falls, throughput kept)', () => {
    const r = simulate([0, 60, 100, 100, 100, 100, 100, 100, 100], [0, 10, 20, 30, 40, 50, 60, 70, 80], 8);
    expect(r.share, JSON.stringify(r)).toBeGreaterThanOrEqual(0.9);
    // It settles between 3 and 5 of the 8 (stepping down while latency is high, back up while clean).
    expect(Math.max(...r.visited.slice(-10)), JSON.stringify(r)).toBeLessThanOrEqual(5);
  });

  it("the model's clock leaves out the time waited, and fires once it is spent", async () => {
    let waited = 0;
    let fired = 0;
    const started = Date.now();
    const clock = new ModelClock(started, 100, () => waited, () => fired++);
    waited = 200;
    expect(clock.leftMs(started + 150)).toBe(150);
    await waitFor('the model clock to fire', () => fired === 1, 10_000, 20);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    clock.stop();
  });
});
