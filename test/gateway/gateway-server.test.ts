/**
 * The policy gateway against a real scripted policy server, driven as a hostile sandbox would drive
 * it: other models, paths, methods, headers, huge output caps and bodies, malformed HTTP, floods.
 * Only well-formed chat calls reach the policy server, with the model and the cap the worker sets;
 * nothing the sandbox sends can take the gateway down.
 */
import http from 'node:http';
import net from 'node:net';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startPolicyGateway, type PolicyGateway, type PolicyGatewayOptions } from '../../src/gateway/index.ts';
import type { PolicySettings } from '../../src/shared/config/run-settings.ts';
import { rolloutPolicy } from '../helpers/policy.ts';
import { upstreamGiveUpReason } from '../../src/agent/upstream-give-up.ts';
import { encodePng } from '../helpers/fixture-images.ts';
import { scripts, startScriptedPolicyServer, type ScriptedPolicyServer } from '../helpers/scripted-policy-server.ts';
import { waitFor } from '../helpers/wait.ts';

const KEY = 'sk-real-policy-key-0001';
const TOKEN = 'dummy-access-token';
const MODEL = 'the-policy-model';

interface Reply { status: number; text: string; headers: http.IncomingHttpHeaders }

function send(socketPath: string, method: string, urlPath: string, body: string | null, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const h: Record<string, string | number> = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers };
    if (body !== null) h['content-length'] = Buffer.byteLength(body);
    const req = http.request({ socketPath, path: urlPath, method, headers: h }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), headers: res.headers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body ?? undefined);
  });
}

const post = (socketPath: string, body: unknown, headers: Record<string, string> = {}) =>
  send(socketPath, 'POST', '/v1/chat/completions', JSON.stringify(body), headers);

const chat = (extra: Record<string, unknown> = {}) => ({ model: 'vlm', messages: [{ role: 'user', content: 'hi' }], ...extra });

/** Write raw bytes to the gateway socket and read what comes back until it closes. */
function raw(socketPath: string, bytes: string | Buffer, endAfterMs = 300): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(socketPath);
    let out = '';
    socket.on('data', (d) => (out += d.toString()));
    socket.on('error', () => resolve(out));
    socket.on('close', () => resolve(out));
    socket.write(bytes);
    setTimeout(() => socket.destroy(), endAfterMs);
  });
}

type GatewayTestOptions = Partial<Omit<PolicyGatewayOptions, 'policy'>> & { upstream?: string; apiKey?: string | null; settings?: Partial<PolicySettings> };

describe('policy gateway', () => {
  let dir: string;
  let server: ScriptedPolicyServer;
  let gateway: PolicyGateway | null = null;

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'gw-test-'));
    server = await startScriptedPolicyServer({ script: scripts.answer('\\boxed{A}') });
  });
  afterEach(async () => {
    await gateway?.close();
    gateway = null;
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A gateway to `upstream` (default the scripted server) with `KEY`, the run's policy section as `settings` lay over a 1 MiB body bound, 100 calls and 100 tokens out. */
  async function open({ upstream = server.url, apiKey = KEY, settings, ...extra }: GatewayTestOptions = {}): Promise<string> {
    gateway = await startPolicyGateway({
      policy: rolloutPolicy(upstream, { apiKey, model: MODEL, settings: { max_output_tokens: 100, max_request_mib: 1, max_calls_per_rollout: 100, ...settings } }),
      accessToken: TOKEN, imageBudgetBytes: 32 << 20, socketPath: path.join(dir, 'gw.sock'), ...extra,
    });
    return gateway.socketPath!;
  }

  it('forwards a chat call with the real key and the policy model, caps the output, drops other headers and reads the answer', async () => {
    const sock = await open();
    const res = await post(sock, chat({ model: 'gpt-5-the-strong-one', stream: true, max_tokens: 5000 }), { 'openai-organization': 'org-x', 'x-forwarded-for': '1.2.3.4', cookie: 'a=b' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/event-stream/);
    const seen = server.requests[0];
    expect(seen.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(seen.body).toMatchObject({ model: MODEL, max_tokens: 100, stream_options: { include_usage: true } });
    for (const h of ['openai-organization', 'x-forwarded-for', 'cookie']) expect(seen.headers[h]).toBeUndefined();
    const call = gateway!.calls[0];
    expect(call).toMatchObject({ status: 200, stream: true, connected: true, response: { text: '\\boxed{A}', finishReason: 'stop' } });
    expect(call.response.promptTokens).toBeGreaterThan(0);
    expect(gateway!.stats()).toMatchObject({ calls: 1, answered: 1, upstreamErrors: 0, refused: {} });
  });

  it('caps max_tokens and max_completion_tokens whatever the content type says', async () => {
    const sock = await open();
    for (const type of ['application/JSON', 'text/plain', 'application/x-www-form-urlencoded']) {
      expect((await post(sock, chat({ max_tokens: 10 ** 9, max_completion_tokens: 10 ** 9 }), { 'content-type': type })).status).toBe(200);
    }
    expect(server.requests).toHaveLength(3);
    for (const r of server.requests) expect(r.body).toMatchObject({ max_tokens: 100, max_completion_tokens: 100, model: MODEL });
  });

  it('refuses every other path, method, token and body with a 4xx, forwards none and counts them', async () => {
    const sock = await open();
    const attempts: Array<[Promise<Reply>, number]> = [
      [send(sock, 'GET', '/v1/chat/completions', null), 405],
      [send(sock, 'PUT', '/v1/chat/completions', JSON.stringify(chat())), 405],
      [send(sock, 'POST', '/v1/files', JSON.stringify({ purpose: 'x' })), 404],
      [send(sock, 'POST', '/v1/load_lora_adapter', JSON.stringify({ lora_name: 'x', lora_path: '/x' })), 404],
      [send(sock, 'POST', '/v1/responses', JSON.stringify({ model: 'x', input: 'hi', max_output_tokens: 10 ** 9 })), 404],
      [send(sock, 'POST', '/v1/chat/completions/../../admin', JSON.stringify(chat())), 404],
      [send(sock, 'POST', '/v1/chat/completions?x=1', JSON.stringify(chat())), 404],
      [send(sock, 'POST', '/v1/chat/completions', JSON.stringify(chat()), { authorization: 'Bearer wrong' }), 401],
      [send(sock, 'POST', '/v1/chat/completions', 'not json at all'), 400],
      [send(sock, 'POST', '/v1/chat/completions', JSON.stringify(chat({ n: 5 }))), 400],
      [send(sock, 'POST', '/v1/chat/completions', JSON.stringify(chat({ extra_body: { lora: 'x' } }))), 400],
      [send(sock, 'POST', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'x', secret_field: 1 }], model: 'm' })), 400],
      [send(sock, 'POST', '/v1/chat/completions', JSON.stringify(chat({ messages: [{ role: 'user', content: 'x'.repeat(1_100_000) }] }))), 413],
    ];
    for (const [reply, status] of attempts) expect((await reply).status).toBe(status);
    expect(server.requests).toHaveLength(0);
    expect(gateway!.stats().refused).toEqual({ method: 2, path: 5, token: 1, body: 4, too_large: 1 });
    // GET /v1/models is answered by the gateway itself with the policy model only.
    const models = await send(sock, 'GET', '/v1/models', null);
    expect(JSON.parse(models.text).data.map((m: { id: string }) => m.id)).toEqual([MODEL]);
    expect(server.requests).toHaveLength(0);
  });

  it('survives malformed HTTP, huge headers, bodies that never end and resets, and serves the next call', async () => {
    const sock = await open();
    expect(await raw(sock, 'GET http://[ HTTP/1.1\r\nHost: x\r\n\r\n')).toMatch(/^HTTP\/1\.1 4\d\d/);
    expect(await raw(sock, `GET http://[ HTTP/1.1\r\nauthorization: Bearer ${TOKEN}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 4\d\d/);
    expect(await raw(sock, 'this is not http\r\n\r\n')).toMatch(/^HTTP\/1\.1 400/);
    expect(await raw(sock, `GET /v1/models HTTP/1.1\r\nx-big: ${'a'.repeat(100_000)}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 4\d\d/);
    await raw(sock, `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${TOKEN}\r\ncontent-length: 100000\r\n\r\n{"model":`, 200);
    await raw(sock, Buffer.from([0, 255, 1, 254, 13, 10, 13, 10]));
    await raw(sock, `POST /v1/chat/completions HTTP/1.1\r\ntransfer-encoding: chunked\r\nauthorization: Bearer ${TOKEN}\r\n\r\nZZZ\r\n`);
    const ok = await post(sock, chat());
    expect(ok.status).toBe(200);
    expect(server.requests).toHaveLength(1);
    expect(gateway!.stats().refused.malformed_http).toBeGreaterThanOrEqual(3);
  });

  it('bounds calls in flight and calls per rollout', async () => {
    server.setScript(scripts.hang());
    let spent = 0;
    const sock = await open({ settings: { max_concurrent_calls: 2, max_calls_per_rollout: 3 }, onBudgetExhausted: () => spent++ });
    const hanging = [post(sock, chat()).catch(() => null), post(sock, chat()).catch(() => null)];
    await waitFor('both calls at the policy server', () => server.requests.length === 2, 10_000, 20);
    const busy = await post(sock, chat());
    expect(busy.status).toBe(429);
    expect(busy.headers['retry-after']).toBe('1');
    server.setScript(scripts.answer('ok'));
    await gateway!.close(); // cuts the hanging calls
    void hanging;
    gateway = null;
    const sock2 = await open({ settings: { max_concurrent_calls: 2, max_calls_per_rollout: 2 }, onBudgetExhausted: () => spent++ });
    expect((await post(sock2, chat())).status).toBe(200);
    expect((await post(sock2, chat())).status).toBe(200);
    const over = await post(sock2, chat());
    expect(over.status).toBe(400);
    expect((await post(sock2, chat())).status).toBe(400);
    expect(spent).toBe(1);
    expect(gateway!.stats().refused).toEqual({ budget: 2 });
  });

  it('assembles tool calls from the stream, and reads tool results and images from the next request', async () => {
    const sock = await open();
    server.setScript(() => ({ kind: 'tool_calls', text: 'Let me crop.', calls: [{ name: 'read', arguments: { filePath: 'crop.png' } }] }));
    await post(sock, chat({ stream: true }));
    const first = gateway!.calls[0];
    expect(first.response.text).toBe('Let me crop.');
    expect(first.response.toolCalls).toHaveLength(1);
    expect(first.response.toolCalls[0]).toMatchObject({ name: 'read', arguments: '{"filePath":"crop.png"}' });
    const png = Buffer.from(encodePng(8, 8, () => [9, 9, 9]));
    const callId = first.response.toolCalls[0].id;
    server.setScript(scripts.answer('done'));
    await post(sock, chat({
      stream: true,
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'Let me crop.', tool_calls: [{ id: callId, type: 'function', function: { name: 'read', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: callId, content: 'Image read successfully' },
        { role: 'user', content: [{ type: 'text', text: 'Attached media from tool result:' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${png.toString('base64')}` } }] },
      ],
    }));
    const second = gateway!.calls[1];
    expect(second.request.toolResults).toEqual([{ toolCallId: callId, output: 'Image read successfully', images: [expect.stringMatching(/^[0-9a-f]{64}$/)] }]);
    expect(gateway!.images.get(second.request.toolResults[0].images[0])?.bytes?.equals(png)).toBe(true);
    expect(gateway!.stats().toolCalls).toBe(1);
  });

  it('passes upstream 5xx through and counts them as failures; a success resets the count', async () => {
    const sock = await open({ apiKey: null });
    server.setScript(scripts.fail(503));
    expect((await post(sock, chat())).status).toBe(503);
    expect((await post(sock, chat())).status).toBe(503);
    expect(server.requests[0].headers.authorization).toBeUndefined();
    expect(gateway!.stats()).toMatchObject({ retryableStatuses: 2, consecutiveFailures: 2, upstreamErrors: 0 });
    expect(upstreamGiveUpReason(gateway!.stats(), { maxConsecutiveFailures: 2, maxFailingS: 999 })).toMatch(/2 calls in a row/);
    server.setScript(scripts.answer('ok'));
    expect((await post(sock, chat())).status).toBe(200);
    expect(gateway!.stats()).toMatchObject({ consecutiveFailures: 0, answered: 1 });
  });

  it('answers 502 and records connection_refused when the policy server is down; 504 when it hangs', async () => {
    const url = server.url;
    await server.close();
    server = await startScriptedPolicyServer();
    let sock = await open({ upstream: url });
    const res = await post(sock, chat());
    expect(res.status).toBe(502);
    expect(res.text).toMatch(/unreachable/);
    expect(res.text).not.toContain(KEY);
    expect(gateway!.stats()).toMatchObject({ upstreamErrors: 1, upstreamErrorReasons: { connection_refused: 1 }, consecutiveFailures: 1 });
    expect(gateway!.calls[0].connected).toBe(false);
    await gateway!.close();
    server.setScript(scripts.hang());
    sock = await open({ requestTimeoutMs: 300 });
    expect((await post(sock, chat({ stream: true }))).status).toBe(504);
    expect(gateway!.stats().upstreamErrorReasons).toEqual({ timeout: 1 });
    expect(gateway!.calls[0]).toMatchObject({ connected: true, status: null, upstreamErrorKind: 'timeout' });
  });

  it('captures requests and streamed responses (unknown fields kept, images replaced) and removes its socket on close', async () => {
    const capturePath = path.join(dir, 'out', 'r1.calls.jsonl');
    const imageDir = path.join(dir, 'out', 'images');
    const sock = await open({ tcp: { host: '127.0.0.1', port: 0 }, capture: { path: capturePath, imageDir } });
    expect(gateway!.tcpPort).toBeGreaterThan(0);
    const png = Buffer.from(encodePng(4, 4, () => [1, 2, 3]));
    const image = `data:image/png;base64,${png.toString('base64')}`;
    await post(sock, chat({ stream: true, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: image } }] }], logprobs: true }));
    await gateway!.close();
    expect(existsSync(path.join(dir, 'gw.sock'))).toBe(false);
    const lines = readFileSync(capturePath, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0].request.logprobs).toBe(true);
    expect(JSON.stringify(lines[0].request)).toMatch(/<image sha256=[0-9a-f]{64} bytes=\d+ mime=image\/png>/);
    expect(JSON.stringify(lines[0])).not.toContain('base64');
    expect(lines[0].response.at(-1).usage.completion_tokens).toBeGreaterThan(0);
    expect(readdirSync(imageDir)).toHaveLength(1);
    expect(readFileSync(capturePath, 'utf8')).not.toContain(KEY);
  });

  it('records the agent socket\'s calls; the other socket\'s are forwarded, counted as forged, and never count against the server', async () => {
    const agentSock = path.join(dir, 'agent.sock');
    const sock = await open({ agentSocketPath: agentSock });
    server.setScript(scripts.fail(503));
    expect((await post(sock, chat())).status).toBe(503);
    expect((await post(sock, chat())).status).toBe(503);
    server.setScript(scripts.answer('so \\boxed{A}'));
    expect((await post(agentSock, chat())).status).toBe(200);
    expect((await post(sock, chat({ messages: [{ role: 'user', content: 'a question of my own' }] }))).status).toBe(200);
    expect(server.requests).toHaveLength(4);
    expect(gateway!.calls).toHaveLength(1);
    expect(gateway!.calls[0]).toMatchObject({ origin: 'agent', status: 200, response: expect.objectContaining({ text: 'so \\boxed{A}' }) });
    expect(gateway!.stats()).toMatchObject({ forgedCalls: 3, calls: 1, answered: 1, retryableStatuses: 0, consecutiveFailures: 0, failingSince: null });
  });

  it('keeps the agent\'s last slot: calls of other origins cannot take every call in flight', async () => {
    const agentSock = path.join(dir, 'agent.sock');
    const sock = await open({ agentSocketPath: agentSock, settings: { max_concurrent_calls: 2 } });
    server.setScript(scripts.hang());
    const hanging = [post(sock, chat()).catch(() => null)];
    await waitFor('the first call at the policy server', () => server.requests.length === 1, 10_000, 20);
    expect((await post(sock, chat())).status).toBe(429);
    hanging.push(post(agentSock, chat()).catch(() => null));
    await waitFor('the agent\'s call at the policy server', () => server.requests.length === 2, 10_000, 20);
    await gateway!.close();
    gateway = null;
    await Promise.all(hanging);
  });

  it('without an origin, the conversation\'s chain decides: a call that does not continue it is forged', async () => {
    const sock = await open();
    server.setScript(() => ({ kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: 'ls' } }] }));
    await post(sock, chat());
    const id = gateway!.calls[0].response.toolCalls[0].id;
    server.setScript(scripts.answer('\\boxed{B}'));
    expect((await post(sock, chat({ messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: '', tool_calls: [{ id: 'call_forged', type: 'function', function: { name: 'bash', arguments: '{}' } }] }, { role: 'tool', tool_call_id: 'call_forged', content: 'forged' }] }))).status).toBe(200);
    const next = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: '', tool_calls: [{ id, type: 'function', function: { name: 'bash', arguments: '{"command":"ls"}' } }] }, { role: 'tool', tool_call_id: id, content: 'puzzle.png' }];
    expect((await post(sock, chat({ messages: next }))).status).toBe(200);
    expect(gateway!.calls.map((c) => c.origin)).toEqual(['unknown', 'unknown']);
    expect(gateway!.calls[1].request.toolResults).toEqual([{ toolCallId: id, output: 'puzzle.png', images: [] }]);
    expect(gateway!.stats().forgedCalls).toBe(1);
  });

  it('an answer the sandbox never reads: the deadline is the sandbox\'s stall, never a policy-server failure', async () => {
    await server.close();
    server = await startScriptedPolicyServer({ script: () => ({ kind: 'text', text: 'y'.repeat(8 << 20) }), chunkChars: 1 << 20 });
    const sock = await open({ requestTimeoutMs: 1500 });
    const body = JSON.stringify(chat({ stream: true }));
    const stalled = net.connect(sock);
    stalled.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nauthorization: Bearer ${TOKEN}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    stalled.pause();
    await waitFor('the stalled call to end', () => gateway!.calls.length > 0, 10_000, 50);
    stalled.destroy();
    expect(gateway!.calls[0]).toMatchObject({ status: 200, clientStalled: true });
    expect(gateway!.calls[0].upstreamError).toBeUndefined();
    expect(gateway!.stats()).toMatchObject({ upstreamErrors: 0, retryableStatuses: 0, consecutiveFailures: 0, answered: 0 });
  });
});
