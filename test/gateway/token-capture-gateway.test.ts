/**
 * Token capture in the gateway against a vLLM-shaped scripted server (test/helpers/vllm-policy-server.ts),
 * driven over the gateway's socket as OpenCode drives it (streamed and not), and against a hostile
 * policy server: what each call records, the chain, the trajectory's mask on each fault, and calls
 * that are not the conversation's kept apart.
 */
import { randomInt } from 'node:crypto';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startPolicyGateway, type PolicyGateway } from '../../src/gateway/index.ts';
import { rolloutPolicy } from '../helpers/policy.ts';
import { buildTrajectory } from '../../src/agent/trajectory-builder.ts';
import { decodeTrajectory, encodeTrajectory } from '../../src/shared/records/trajectory-codec.ts';
import type { StopReason } from '../../src/shared/scoring/stop-reasons.ts';
import { encodePng } from '../helpers/fixture-images.ts';
import type { ChatMessage, Script } from '../helpers/scripted-policy-server.ts';
import { SPECIAL, renderPrompt, startVllmPolicyServer, type VllmPolicyServer } from '../helpers/vllm-policy-server.ts';

const TOKEN = 'dummy-access-token';
const PNG = `data:image/png;base64,${Buffer.from(encodePng(8, 8, () => [1, 2, 3])).toString('base64')}`;

function post(socketPath: string, body: unknown): Promise<{ status: number; text: string; type: string }> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: '/v1/chat/completions', method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), type: String(res.headers['content-type']) }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** The assistant message and tool call id a streamed answer carried (as OpenCode assembles it). */
function fromSse(text: string): { content: string; toolCalls: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>; raw: unknown[] } {
  const raw = text.split('\n').filter((l) => l.startsWith('data: ') && !l.includes('[DONE]')).map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
  let content = '';
  const toolCalls: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }> = [];
  for (const c of raw as Array<{ choices: Array<{ delta: { content?: string; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }> } }> }>) {
    for (const ch of c.choices) {
      content += ch.delta.content ?? '';
      for (const t of ch.delta.tool_calls ?? []) toolCalls.push({ id: t.id, type: 'function', function: t.function });
    }
  }
  return { content, toolCalls, raw };
}

const bashThenAnswer: Script = (body) =>
  (body.messages ?? []).some((m) => m.role === 'tool')
    ? { kind: 'text', text: 'So \\boxed{B}' }
    : { kind: 'tool_calls', text: 'Let me check.', calls: [{ name: 'bash', arguments: { command: 'ls' } }] };

describe('token capture in the gateway', () => {
  let dir: string;
  let server: VllmPolicyServer;
  let gateway: PolicyGateway | null = null;

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'tc-gw-'));
    server = await startVllmPolicyServer(bashThenAnswer);
  });
  afterEach(async () => {
    await gateway?.close();
    gateway = null;
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function open(upstream = server.url, imageBudgetMib?: number): Promise<string> {
    const settings = { max_output_tokens: 100, max_request_mib: 8, max_calls_per_rollout: 100, token_capture: true, weight_version: 'w1', sampling: { temperature: 1 } };
    gateway = await startPolicyGateway({
      policy: rolloutPolicy(upstream, { model: 'toy', settings: imageBudgetMib ? { ...settings, token_capture_max_image_mib: imageBudgetMib } : settings }),
      accessToken: TOKEN, imageBudgetBytes: 32 << 20, socketPath: path.join(dir, 'gw.sock'),
    });
    return gateway.socketPath!;
  }

  const firstWith = (png: string): ChatMessage[] => [{ role: 'system', content: 'You are an agent.' }, { role: 'user', content: [{ type: 'image_url', image_url: { url: png } }, { type: 'text', text: 'Which?' }] }];
  const first = firstWith(PNG);

  /** Two calls as OpenCode makes them: the second repeats the first, its answer, and the tool result. */
  async function conversation(sock: string, stream: boolean, png = PNG) {
    const first = firstWith(png);
    const r1 = await post(sock, { model: 'x', messages: first, stream, temperature: 0.2 });
    expect(r1.status).toBe(200);
    let assistant: ChatMessage;
    if (stream) {
      expect(r1.type).toMatch(/event-stream/);
      const { content, toolCalls, raw } = fromSse(r1.text);
      expect(JSON.stringify(raw)).not.toMatch(/token_ids|logprobs/);
      assistant = { role: 'assistant', content, tool_calls: toolCalls };
    } else {
      const json = JSON.parse(r1.text) as { prompt_token_ids?: unknown; choices: Array<{ message: ChatMessage; token_ids?: unknown; logprobs?: unknown }> };
      expect(json.prompt_token_ids).toBeUndefined();
      expect(json.choices[0].token_ids).toBeUndefined();
      expect(json.choices[0].logprobs).toBeUndefined();
      assistant = json.choices[0].message;
    }
    const second = [...first, assistant, { role: 'tool', tool_call_id: assistant.tool_calls![0].id, content: 'puzzle.png' }];
    const r2 = await post(sock, { model: 'x', messages: second, stream });
    expect(r2.status).toBe(200);
    return { second };
  }

  function trajectory(stopReason: StopReason = 'answered') {
    return buildTrajectory({
      request: { runId: 'r', rolloutId: 'ro', repeat: 0, attempt: 1, task: { task_id: 't', image_sha256: 'none' } as never },
      policyModel: 'toy', weightVersion: 'w1', stopReason, capture: gateway!.tokenCapture!, images: gateway!.images,
    });
  }

  for (const stream of [true, false]) {
    it(`${stream ? 'a streaming' : 'a non-streaming'} client: asked upstream without streaming, the chain holds, what the environment inserted is masked 0`, async () => {
      const sock = await open();
      const { second } = await conversation(sock, stream);
      expect(server.requests.map((b) => b.stream)).toEqual([false, false]);
      const rec = gateway!.tokenCapture!;
      expect(rec.chain).toEqual({ contiguous: true, breaks: [] });
      const p1 = renderPrompt(first);
      const p2 = renderPrompt(second);
      expect(rec.calls[0].prompt_token_ids).toEqual(p1);
      const gen1 = rec.calls[0].generation_token_ids!;
      expect(rec.calls[1].inserted_token_ids).toEqual(p2.slice(p1.length + gen1.length));
      expect(rec.calls[1].prompt_token_ids).toBeUndefined();
      expect(rec.calls.map((c) => c.sampling)).toEqual([{ temperature: 1 }, { temperature: 1 }]);
      expect(rec.calls.every((c) => c.weight_version === 'w1')).toBe(true);
      expect(rec.calls[0].images).toHaveLength(1);
      expect(rec.calls[1].images).toEqual([]);
      const t = trajectory();
      expect(t).toMatchObject({ mask_sample: false, mask_reason: null, flat_calls: 2 });
      expect(t.response_ids).toEqual([...p2.slice(p1.length), ...rec.calls[1].generation_token_ids!]);
      expect(t.response_mask).toEqual([...gen1.map(() => 1), ...rec.calls[1].inserted_token_ids!.map(() => 0), ...rec.calls[1].generation_token_ids!.map(() => 1)]);
      expect(t.turns).toEqual([{ call: 0, generated: gen1.length, inserted: p1.length }, { call: 1, generated: rec.calls[1].generation_token_ids!.length, inserted: rec.calls[1].inserted_token_ids!.length }]);
      // Through Redis and back: the same record.
      expect(decodeTrajectory(encodeTrajectory(t))).toEqual(t);
    });
  }

  it('a server without log-probabilities masks the trajectory missing_logprobs; one that ignores the fields, server_ignored_token_fields', async () => {
    server.switches.noLogprobs = true;
    const sock = await open();
    await conversation(sock, true);
    expect(gateway!.tokenCapture!.calls[0].missing).toEqual(['logprobs']);
    expect(trajectory()).toMatchObject({ mask_sample: true, mask_reason: 'missing_logprobs' });
    await gateway!.close();
    server.switches.noLogprobs = false;
    server.switches.ignoreFields = true;
    await open();
    await conversation(gateway!.socketPath!, false);
    expect(gateway!.tokenCapture!.calls[0].missing).toEqual(['prompt_token_ids', 'token_ids', 'logprobs']);
    const t = trajectory();
    expect(t).toMatchObject({ mask_sample: true, mask_reason: 'server_ignored_token_fields', flat_calls: 0, response_ids: [] });
    expect(t.mask_detail).toMatch(/vLLM/);
  });

  it('an output cap and an unfinished rollout do not mask the trajectory (the model caused them); a call that is not the conversation\'s stays out of the chain', async () => {
    server.setScript((body) => ((body.messages ?? []).some((m) => m.role === 'tool') ? { kind: 'text', text: 'cut', finishReason: 'length' } : bashThenAnswer(body, 0, { note: () => undefined })));
    const sock = await open();
    await conversation(sock, true);
    // Something the model ran sends a chat call of its own (it does not extend the conversation).
    expect((await post(sock, { model: 'x', messages: [{ role: 'user', content: 'forged' }], stream: true })).status).toBe(200);
    const rec = gateway!.tokenCapture!;
    expect(rec.calls).toHaveLength(2);
    expect(rec.other_calls).toMatchObject([{ index: 2, origin: 'unknown', status: 200 }]);
    expect(trajectory('output_cap')).toMatchObject({ mask_sample: false, mask_reason: null, flat_calls: 2, stop_reason: 'output_cap' });
    expect(trajectory('output_cap').calls[1].finish_reason).toBe('length');
    server.setScript(bashThenAnswer);
    await gateway!.close();
    await open();
    await conversation(gateway!.socketPath!, true);
    for (const stop of ['timeout', 'no_answer', 'context_limit', 'agent_error'] as const) expect(trajectory(stop)).toMatchObject({ mask_sample: false, mask_reason: null, flat_calls: 2 });
  });

  it('the images of the answered calls are kept for the trajectory within their own budget; past it the rollout says it cannot be trained and why', async () => {
    await open(server.url);
    await conversation(gateway!.socketPath!, false);
    const sha = gateway!.tokenCapture!.calls[0].images[0];
    expect(gateway!.tokenCapture!.images.get(sha)?.bytes?.length).toBeGreaterThan(0);
    expect(trajectory()).toMatchObject({ mask_sample: false, images: [sha] });
    await gateway!.close();
    // Past a 1 MiB budget: a puzzle of noise, over 1 MiB as a PNG.
    const big = `data:image/png;base64,${Buffer.from(encodePng(620, 620, () => [randomInt(256), randomInt(256), randomInt(256)])).toString('base64')}`;
    await open(server.url, 1);
    await conversation(gateway!.socketPath!, false, big);
    const bigSha = gateway!.tokenCapture!.calls[0].images[0];
    expect(gateway!.tokenCapture!.images.get(bigSha)?.bytes).toBeNull();
    const t = trajectory();
    expect(t).toMatchObject({ mask_sample: true, mask_reason: 'images_over_budget' });
    expect(t.mask_detail).toMatch(/policy\.token_capture_max_image_mib/);
  });

  it('a hostile policy server: ids that are not token ids, log-probabilities that are not, a mismatch; recorded as missing, never thrown', async () => {
    const bodies = [
      { prompt_token_ids: [1, -2, 3], choices: [{ index: 0, message: { role: 'assistant', content: 'a' }, finish_reason: 'stop', token_ids: [1.5], logprobs: { content: [{ token: 'x', logprob: 'NaN' }] } }] },
      { prompt_token_ids: 'lots', choices: [{ index: 0, message: { role: 'assistant', content: 'b' }, finish_reason: 'stop', token_ids: [1, 2], logprobs: { content: [{ token: 'token_id:1', logprob: -0.1 }] } }] },
      { prompt_token_ids: [SPECIAL.user], choices: [{ index: 0, message: { role: 'assistant', content: 'c' }, finish_reason: 'stop', logprobs: { content: [{ token: 'token_id:9', logprob: 0.5 }] } }] },
    ];
    let i = 0;
    const hostile = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(bodies[i++ % bodies.length])));
    });
    await new Promise<void>((r) => hostile.listen(0, '127.0.0.1', () => r()));
    try {
      const sock = await open(`http://127.0.0.1:${(hostile.address() as AddressInfo).port}/v1`);
      const messages: ChatMessage[] = [];
      for (let k = 0; k < 3; k++) {
        messages.push({ role: 'user', content: `q${k}` });
        const r = await post(sock, { model: 'x', messages, stream: true });
        expect(r.status).toBe(200);
        const { content } = fromSse(r.text);
        expect(content).toBe(['a', 'b', 'c'][k]);
        messages.push({ role: 'assistant', content });
      }
      const rec = gateway!.tokenCapture!;
      expect(rec.calls.map((c) => c.missing)).toEqual([['prompt_token_ids', 'token_ids', 'logprobs'], ['prompt_token_ids', 'logprobs'], ['token_ids', 'logprobs']]);
      expect(rec.calls.every((c) => c.generation_token_ids === null || c.generation_token_ids.every(Number.isInteger))).toBe(true);
    } finally {
      hostile.closeAllConnections();
      await new Promise<void>((r) => hostile.close(() => r()));
    }
  });
});
