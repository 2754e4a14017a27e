import http from 'node:http';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startPolicyGateway, type PolicyGateway } from '../../src/workers/sandbox/gateway/policy-gateway.ts';
import { upstreamGiveUpReason } from '../../src/workers/sandbox/gateway/health.ts';
import { scripts, startScriptedPolicyServer, type ScriptedPolicyServer } from '../helpers/scripted-policy-server.ts';

const KEY = 'sk-real-policy-key-0001';
const TOKEN = 'dummy-access-token';

function post(socketPath: string, urlPath: string, body: unknown, token = TOKEN): Promise<{ status: number; text: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = http.request(
      { socketPath, path: urlPath, method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, 'content-length': Buffer.byteLength(payload) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), headers: res.headers }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const chat = (extra: Record<string, unknown> = {}) => ({ model: 'vlm', messages: [{ role: 'user', content: 'hi' }], ...extra });

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

  it('forwards a streamed call with the real key, asks for usage, clamps max_tokens and records tokens', async () => {
    gateway = await startPolicyGateway({ upstreamBaseUrl: server.url, apiKey: KEY, socketPath: path.join(dir, 'gw.sock'), accessToken: TOKEN, maxOutputTokens: 100 });
    const res = await post(gateway.socketPath!, '/v1/chat/completions', chat({ stream: true, max_tokens: 5000 }));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/event-stream/);
    expect(res.text).toContain('\\\\boxed{A}');
    expect(res.text).toContain('"usage"');
    const seen = server.requests[0];
    expect(seen.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(seen.body?.max_tokens).toBe(100);
    expect(seen.body?.stream_options).toEqual({ include_usage: true });
    expect(gateway.calls).toHaveLength(1);
    expect(gateway.calls[0]).toMatchObject({ status: 200, stream: true, finishReason: 'stop' });
    expect(gateway.calls[0].promptTokens).toBeGreaterThan(0);
    expect(gateway.calls[0].completionTokens).toBeGreaterThan(0);
    expect(gateway.stats()).toMatchObject({ successes: 1, upstreamErrors: 0, consecutiveFailures: 0 });
  });

  it('rejects a caller without the access token and forwards nothing', async () => {
    gateway = await startPolicyGateway({ upstreamBaseUrl: server.url, apiKey: KEY, socketPath: path.join(dir, 'gw.sock'), accessToken: TOKEN });
    const res = await post(gateway.socketPath!, '/v1/chat/completions', chat(), 'wrong');
    expect(res.status).toBe(401);
    expect(server.requests).toHaveLength(0);
  });

  it('passes upstream 5xx through and counts them as failures; a success resets the count', async () => {
    gateway = await startPolicyGateway({ upstreamBaseUrl: server.url, apiKey: null, socketPath: path.join(dir, 'gw.sock') });
    server.setScript(scripts.fail(503));
    expect((await post(gateway.socketPath!, '/v1/chat/completions', chat())).status).toBe(503);
    expect((await post(gateway.socketPath!, '/v1/chat/completions', chat())).status).toBe(503);
    expect(server.requests[0].headers.authorization).toBeUndefined();
    expect(gateway.stats()).toMatchObject({ retryableStatuses: 2, consecutiveFailures: 2, upstreamErrors: 0 });
    expect(upstreamGiveUpReason(gateway.stats(), { maxConsecutiveFailures: 2, maxFailingS: 999 })).toMatch(/2 calls in a row/);
    server.setScript(scripts.answer('ok'));
    expect((await post(gateway.socketPath!, '/v1/chat/completions', chat())).status).toBe(200);
    expect(gateway.stats()).toMatchObject({ consecutiveFailures: 0, successes: 1 });
  });

  it('answers 502 and counts a connection_refused upstream error when the policy server is down', async () => {
    const url = server.url;
    await server.close();
    server = await startScriptedPolicyServer();
    gateway = await startPolicyGateway({ upstreamBaseUrl: url, apiKey: KEY, socketPath: path.join(dir, 'gw.sock') });
    const res = await post(gateway.socketPath!, '/v1/chat/completions', chat());
    expect(res.status).toBe(502);
    expect(res.text).toMatch(/unreachable/);
    expect(res.text).not.toContain(KEY);
    expect(gateway.stats()).toMatchObject({ upstreamErrors: 1, upstreamErrorReasons: { connection_refused: 1 }, consecutiveFailures: 1 });
  });

  it('answers 504 when the policy server hangs past the request timeout', async () => {
    server.setScript(scripts.hang());
    gateway = await startPolicyGateway({ upstreamBaseUrl: server.url, apiKey: KEY, socketPath: path.join(dir, 'gw.sock'), requestTimeoutMs: 300 });
    const res = await post(gateway.socketPath!, '/v1/chat/completions', chat({ stream: true }));
    expect(res.status).toBe(504);
    expect(gateway.stats().upstreamErrorReasons).toEqual({ timeout: 1 });
  });

  it('captures requests and streamed responses (unknown fields kept, images replaced) and removes its socket on close', async () => {
    const capturePath = path.join(dir, 'out', 'r1.calls.jsonl');
    const imageDir = path.join(dir, 'out', 'images');
    gateway = await startPolicyGateway({ upstreamBaseUrl: server.url, apiKey: KEY, socketPath: path.join(dir, 'gw.sock'), tcp: { host: '127.0.0.1', port: 0 }, capture: { path: capturePath, imageDir } });
    expect(gateway.tcpPort).toBeGreaterThan(0);
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');
    const image = `data:image/png;base64,${png.toString('base64')}${'A'.repeat(80)}`;
    await post(gateway.socketPath!, '/v1/chat/completions', chat({ stream: true, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: image } }] }], logprobs: true }));
    await gateway.close();
    expect(existsSync(path.join(dir, 'gw.sock'))).toBe(false);
    const lines = readFileSync(capturePath, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0].request.logprobs).toBe(true);
    expect(JSON.stringify(lines[0].request)).toMatch(/<image sha256=[0-9a-f]{64} bytes=\d+ mime=image\/png>/);
    expect(JSON.stringify(lines[0])).not.toContain('base64');
    expect(lines[0].response.sse.at(-1).usage.completion_tokens).toBeGreaterThan(0);
    expect(readdirSync(imageDir)).toHaveLength(1);
    expect(readFileSync(capturePath, 'utf8')).not.toContain(KEY);
  });
});
