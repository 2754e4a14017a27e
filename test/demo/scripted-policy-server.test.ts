import { afterEach, describe, expect, it } from 'vitest';
import { scripts, startScriptedPolicyServer, type ScriptedPolicyServer } from '../helpers/scripted-policy-server.ts';

describe('scripted policy server', () => {
  let server: ScriptedPolicyServer | null = null;
  afterEach(async () => {
    await server?.close();
    server = null;
  });

  const ask = (url: string, body: unknown) =>
    fetch(`${url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('demo mode looks the answer up by question text, after one python tool call', async () => {
    server = await startScriptedPolicyServer({ script: scripts.demo({ 'How many circles': '7', 'Which shape': 'C' }, { fallback: 'A' }) });
    const user = { role: 'user', content: [{ type: 'text', text: 'Which shape is different? (A) ... (C) ...' }] };
    const first = (await (await ask(server.url, { model: 'm', messages: [user] })).json()) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(first.choices[0].finish_reason).toBe('tool_calls');
    expect(JSON.parse(first.choices[0].message.tool_calls[0].function.arguments).command).toMatch(/python3 -c/);
    const messages = [user, { role: 'assistant', content: '', tool_calls: first.choices[0].message.tool_calls }, { role: 'tool', tool_call_id: 'x', content: 'size 8 8 RGB' }];
    const second = (await (await ask(server.url, { model: 'm', messages })).json()) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(second.choices[0].message.content).toMatch(/\\boxed\{C\}/);
    expect(second.usage.prompt_tokens).toBeGreaterThan(0);
    expect(server.requests).toHaveLength(2);
  });

  it('streams tool calls as SSE with usage when asked, and lists models', async () => {
    server = await startScriptedPolicyServer({ script: scripts.toolLoop(), modelName: 'vlm' });
    const res = await ask(server.url, { model: 'vlm', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'go' }] });
    const text = await res.text();
    const chunks = text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    expect(chunks.some((c) => c.choices[0]?.delta?.tool_calls?.[0]?.function?.name === 'bash')).toBe(true);
    expect(chunks.some((c) => c.choices[0]?.finish_reason === 'tool_calls')).toBe(true);
    expect(chunks.at(-1).usage.total_tokens).toBeGreaterThan(0);
    expect(text.trim().endsWith('data: [DONE]')).toBe(true);
    const models = (await (await fetch(`${server.url}/models`)).json()) as { data: Array<{ id: string }> };
    expect(models.data[0].id).toBe('vlm');
  });

  it('answers scripted errors', async () => {
    server = await startScriptedPolicyServer({ script: scripts.contextOverflow() });
    const res = await ask(server.url, { model: 'm', messages: [] });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('context_length_exceeded');
  });
});
