/**
 * A scripted policy server shaped like vLLM's OpenAI server with a deterministic toy tokenizer, for
 * token capture tests. The "chat template" renders each message as its role's special id, the bytes
 * of its canonical text (+1000), a fixed number of placeholder ids per image, and an end-of-turn id;
 * an assistant message renders its text then each tool call (name and canonical JSON arguments); the
 * prompt ends with the assistant's id (the generation prompt). A generation is the rendering of the
 * reply's body and the end-of-turn id, so each call's prompt extends the previous prompt + generation
 * exactly, unless `drift` renders earlier assistant turns without their text (as templates that strip
 * reasoning from earlier turns do). Asked as vLLM is asked (`logprobs`, `return_token_ids`,
 * `return_tokens_as_token_ids`), it returns `prompt_token_ids`, `choices[0].token_ids` and
 * `logprobs.content[].{token: "token_id:<id>", logprob}`, streamed (ids per chunk, as vLLM streams
 * them) or not. Switches: `drift`, `noLogprobs` (no log-probabilities), `ignoreFields` (an
 * OpenAI-only server: none of the fields).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChatMessage, ChatRequestBody, Script } from './scripted-policy-server.ts';

export const SPECIAL = { system: 1, user: 2, assistant: 3, tool: 4, end: 5, image: 6, toolCall: 7, developer: 8 } as const;
/** Placeholder ids per image. */
export const IMAGE_TOKENS = 4;
const BYTE_BASE = 1000;

export interface VllmSwitches {
  drift: boolean;
  noLogprobs: boolean;
  ignoreFields: boolean;
}

const bytes = (s: string): number[] => [...Buffer.from(s, 'utf8')].map((b) => b + BYTE_BASE);

function canonicalJson(text: string): string {
  try {
    const sortKeys = (v: unknown): unknown =>
      Array.isArray(v) ? v.map(sortKeys) : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)).map(([k, x]) => [k, sortKeys(x)])) : v;
    return JSON.stringify(sortKeys(JSON.parse(text)));
  } catch {
    return text;
  }
}

function contentIds(content: unknown): number[] {
  if (typeof content === 'string') return bytes(content);
  if (!Array.isArray(content)) return [];
  const out: number[] = [];
  for (const p of content as Array<{ type?: string; text?: string }>) {
    if (p.type === 'text' && typeof p.text === 'string') out.push(...bytes(p.text));
    else if (p.type === 'image_url') out.push(...Array<number>(IMAGE_TOKENS).fill(SPECIAL.image));
  }
  return out;
}

/** The body of an assistant turn: its text (unless dropped) then its tool calls. */
export function assistantBody(text: string, toolCalls: ReadonlyArray<{ function: { name: string; arguments: string } }>, withText = true): number[] {
  const out = withText ? bytes(text) : [];
  for (const t of toolCalls) out.push(SPECIAL.toolCall, ...bytes(`${t.function.name} ${canonicalJson(t.function.arguments)}`));
  return out;
}

/** The prompt's token ids for `messages` (and the generation prompt). */
export function renderPrompt(messages: readonly ChatMessage[], drift = false): number[] {
  const out: number[] = [];
  for (const m of messages) {
    const role = SPECIAL[m.role as keyof typeof SPECIAL] ?? SPECIAL.user;
    out.push(role);
    if (m.role === 'assistant') out.push(...assistantBody(typeof m.content === 'string' ? m.content : (contentIds(m.content).length ? Buffer.from(contentIds(m.content).map((x) => x - BYTE_BASE)).toString('utf8') : ''), m.tool_calls ?? [], !drift));
    else out.push(...contentIds(m.content));
    out.push(SPECIAL.end);
  }
  out.push(SPECIAL.assistant);
  return out;
}

/** The toy log-probability of a generated id (deterministic). */
export const toyLogprob = (id: number): number => -((id % 7) + 1) / 10;

export interface VllmPolicyServer {
  url: string;
  switches: VllmSwitches;
  /** Every chat request's body, in order. */
  requests: ChatRequestBody[];
  setScript(script: Script): void;
  close(): Promise<void>;
}

export async function startVllmPolicyServer(script: Script, switches: Partial<VllmSwitches> = {}): Promise<VllmPolicyServer> {
  let current = script;
  const sw: VllmSwitches = { drift: false, noLogprobs: false, ignoreFields: false, ...switches };
  const requests: ChatRequestBody[] = [];
  let index = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const path = (req.url ?? '').split('?')[0];
        if (req.method === 'GET' && path.endsWith('/models')) return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'toy', object: 'model' }] }));
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatRequestBody;
        requests.push(body);
        const i = index++;
        const reply = await current(body, i, { note: () => undefined });
        if (reply.kind !== 'text' && reply.kind !== 'tool_calls') {
          res.writeHead(reply.kind === 'error' ? reply.status : 500, { 'content-type': 'application/json' });
          return void res.end(JSON.stringify({ error: { message: 'scripted failure' } }));
        }
        const text = reply.text ?? '';
        const toolCalls = reply.kind === 'tool_calls'
          ? reply.calls.map((c, k) => ({ id: `call_${i}_${k}`, type: 'function' as const, function: { name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments) } }))
          : [];
        const finish = reply.kind === 'text' ? (reply.finishReason ?? 'stop') : 'tool_calls';
        const prompt = renderPrompt(body.messages ?? [], sw.drift);
        const gen = [...assistantBody(text, toolCalls), SPECIAL.end];
        const wantIds = !sw.ignoreFields && body.return_token_ids === true;
        const wantLogprobs = !sw.ignoreFields && !sw.noLogprobs && body.logprobs === true;
        const asToken = (id: number) => (body.return_tokens_as_token_ids === true ? `token_id:${id}` : String(id));
        const logprobs = (ids: number[]) => (wantLogprobs ? { content: ids.map((id) => ({ token: asToken(id), logprob: toyLogprob(id), bytes: [], top_logprobs: [] })) } : null);
        const usage = { prompt_tokens: prompt.length, completion_tokens: gen.length, total_tokens: prompt.length + gen.length };
        const base = { id: `chatcmpl-${i}`, created: 1_700_000_000, model: body.model };
        if (!body.stream) {
          res.writeHead(200, { 'content-type': 'application/json' });
          return void res.end(JSON.stringify({
            ...base, object: 'chat.completion',
            choices: [{ index: 0, message: { role: 'assistant', content: text, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) }, logprobs: logprobs(gen), finish_reason: finish, ...(wantIds ? { token_ids: gen } : {}) }],
            usage, ...(wantIds ? { prompt_token_ids: prompt } : {}),
          }));
        }
        // Streamed as vLLM streams them: prompt ids on the first chunk, each chunk's own generated ids.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const send = (delta: Record<string, unknown>, ids: number[], finishReason: string | null, extra: Record<string, unknown> = {}) =>
          res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', ...extra, choices: [{ index: 0, delta, logprobs: ids.length ? logprobs(ids) : null, finish_reason: finishReason, ...(wantIds ? { token_ids: ids } : {}) }] })}\n\n`);
        const textIds = bytes(text);
        send({ role: 'assistant', content: '' }, [], null, wantIds ? { prompt_token_ids: prompt } : {});
        if (text) send({ content: text }, textIds, null);
        toolCalls.forEach((t, k) => send({ tool_calls: [{ index: k, ...t }] }, assistantBody('', [t]), null));
        send({}, [SPECIAL.end], finish);
        if (body.stream_options?.include_usage) res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [], usage })}\n\n`);
        res.end('data: [DONE]\n\n');
      })().catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: String(err) } }));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    switches: sw,
    requests,
    setScript: (s) => {
      current = s;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
