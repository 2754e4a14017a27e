/**
 * A scripted OpenAI-compatible policy server: chat completions (streaming SSE or plain JSON) with
 * tool calls, driven by a script of (request body, call index) -> reply. It records every request.
 * Tests use it to drive the real OpenCode binary; `vcfleet demo` uses it as a stand-in policy model.
 */
import http from 'node:http';
import { listen } from '../http/listen.ts';
import { scripts } from './scripted-policy-scripts.ts';
import type { ChatRequestBody, Script, ScriptReply } from './scripted-policy-types.ts';

export type { ChatMessage, ChatRequestBody, Script, ScriptContext, ScriptReply } from './scripted-policy-types.ts';

export interface RecordedRequest {
  index: number;
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** Parsed JSON body, or null. */
  body: ChatRequestBody | null;
  receivedAt: number;
}

export interface ScriptedPolicyServer {
  /** Base URL ending in `/v1`. */
  url: string;
  port: number;
  requests: RecordedRequest[];
  notes: string[];
  setScript(script: Script): void;
  close(): Promise<void>;
}

export interface ScriptedPolicyServerOptions {
  script?: Script;
  /** Port to listen on; default 0 (any free port). */
  port?: number;
  host?: string;
  /** Model id listed by `GET /v1/models`. */
  modelName?: string;
  /** Split streamed text into chunks of this many characters; default 40. */
  chunkChars?: number;
  /** Answers a text or tool-calls reply itself when it returns a body (the stand-in's token fields); else the plain answer. */
  completion?(body: ChatRequestBody, reply: Extract<ScriptReply, { kind: 'text' | 'tool_calls' }>, index: number): Record<string, unknown> | null;
  /** Called after each chat-completions request is answered (or failed), with the count so far. */
  onChat?(count: number, reply: ScriptReply): void;
}

/** Rough token count: a token per 4 characters, at least 1. */
function approxTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

function usageFor(body: ChatRequestBody, output: string) {
  const promptTokens = approxTokens(JSON.stringify(body.messages ?? []));
  const completionTokens = approxTokens(output);
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/** Write one scripted reply: SSE or plain JSON, tool calls, an error status, a hang or a cut connection. */
function sendReply(res: http.ServerResponse, body: ChatRequestBody, reply: ScriptReply, modelName: string, chunkChars: number): void {
  // A hang answers nothing; close() drops its connection.
  if (reply.kind === 'hang') return;
  if (reply.kind === 'destroy') {
    res.socket?.destroy();
    return;
  }
  if (reply.kind === 'error') {
    res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
    res.end(JSON.stringify(reply.body ?? { error: { message: `scripted error ${reply.status}`, type: 'server_error' } }));
    return;
  }
  const id = `chatcmpl-${Math.random().toString(36).slice(2, 10)}`;
  const created = Math.floor(Date.now() / 1000);
  const model = body.model ?? modelName;
  const text = reply.kind === 'text' ? reply.text : (reply.text ?? '');
  const toolCalls =
    reply.kind === 'tool_calls'
      ? reply.calls.map((c, i) => ({
          id: `call_${created}_${i}_${Math.random().toString(36).slice(2, 6)}`,
          type: 'function' as const,
          function: { name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments) },
        }))
      : [];
  const finishReason = reply.kind === 'text' ? (reply.finishReason ?? 'stop') : 'tool_calls';
  const usage = usageFor(body, text + JSON.stringify(toolCalls));

  if (!body.stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id, object: 'chat.completion', created, model,
        choices: [{ index: 0, message: { role: 'assistant', content: text, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) }, finish_reason: finishReason }],
        usage,
      }),
    );
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const send = (delta: Record<string, unknown>, finish: string | null) =>
    res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
  send({ role: 'assistant', content: '' }, null);
  for (let i = 0; i < text.length; i += chunkChars) send({ content: text.slice(i, i + chunkChars) }, null);
  toolCalls.forEach((call, index) => send({ tool_calls: [{ index, ...call }] }, null));
  send({}, finishReason);
  if (body.stream_options?.include_usage) {
    res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [], usage })}\n\n`);
  }
  res.end('data: [DONE]\n\n');
}

export async function startScriptedPolicyServer(options: ScriptedPolicyServerOptions = {}): Promise<ScriptedPolicyServer> {
  let script: Script = options.script ?? scripts.answer('\\boxed{A}');
  const requests: RecordedRequest[] = [];
  const notes: string[] = [];
  const modelName = options.modelName ?? 'scripted-vlm';
  const chunkChars = options.chunkChars ?? 40;
  let chatIndex = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void handle(req, res, Buffer.concat(chunks).toString('utf8')).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: String(err) } }));
      });
    });
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, raw: string): Promise<void> {
    let body: ChatRequestBody | null = null;
    try {
      body = raw ? (JSON.parse(raw) as ChatRequestBody) : null;
    } catch {
      body = null;
    }
    const path = (req.url ?? '/').split('?')[0];
    requests.push({ index: requests.length, method: req.method ?? 'GET', path, headers: req.headers, body, receivedAt: Date.now() });
    if (req.method === 'GET' && path.endsWith('/models')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: modelName, object: 'model', owned_by: 'scripted' }] }));
      return;
    }
    if (req.method !== 'POST' || !path.endsWith('/chat/completions') || !body) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `no route for ${req.method} ${path}` } }));
      return;
    }
    const index = chatIndex++;
    const reply = await script(body, index, { note: (t) => notes.push(t) });
    const own = reply.kind === 'text' || reply.kind === 'tool_calls' ? options.completion?.(body, reply, index) : null;
    if (own) res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(own));
    else sendReply(res, body, reply, modelName, chunkChars);
    options.onChat?.(index + 1, reply);
  }

  const listening = await listen(server, options.host ?? '127.0.0.1', options.port ?? 0);
  return {
    url: `${listening.origin}/v1`,
    port: listening.port,
    requests,
    notes,
    setScript(next) {
      script = next;
    },
    close: listening.close,
  };
}
