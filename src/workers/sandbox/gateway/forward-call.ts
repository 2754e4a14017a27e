/**
 * Forwarding one checked chat call to the policy server: the real key added, only the headers a chat
 * call needs, the answer streamed back to the sandbox as it arrives and read on the way (text, tool
 * calls, finish reason, usage). Connection failures, timeouts and hang-ups become facts of the call,
 * never exceptions.
 */
import http from 'node:http';
import https from 'node:https';
import { classifyUpstreamError, codedError, type UpstreamErrorKind } from './upstream-errors.ts';
import { ResponseReader, type AssembledResponse } from './response-reader.ts';

export interface Upstream {
  url: URL;
  /** `/v1`-less path prefix of the policy server, e.g. `/v1` of `http://vllm:8000/v1`. */
  prefix: string;
  apiKey: string | null;
  agent: http.Agent;
  requestTimeoutMs: number;
  connectTimeoutMs: number;
}

export interface ForwardResult {
  connected: boolean;
  status: number | null;
  upstreamError?: string;
  upstreamErrorKind?: UpstreamErrorKind;
  clientAborted?: boolean;
  response: AssembledResponse;
  /** Parsed SSE chunks, when asked for (capture). */
  chunks: unknown[] | null;
}

export function createUpstream(baseUrl: string, apiKey: string | null, requestTimeoutMs: number, connectTimeoutMs: number): Upstream {
  const url = new URL(baseUrl);
  const client = url.protocol === 'https:' ? https : http;
  return { url, prefix: url.pathname.replace(/\/+$/, ''), apiKey, agent: new client.Agent({ keepAlive: true }), requestTimeoutMs, connectTimeoutMs };
}

/** Response headers passed back to the sandbox; everything else (cookies, server details) stays out. */
const RESPONSE_HEADERS = ['content-type', 'cache-control', 'retry-after', 'retry-after-ms'];

function sendJson(res: http.ServerResponse, status: number, message: string, type: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message, type } }));
}

/** Forward `payload` (an already checked and rewritten chat body) and pipe the answer to `res`. */
export function forwardChat(up: Upstream, payload: Buffer, stream: boolean, res: http.ServerResponse, keepChunks: boolean, onOpen: (r: http.ClientRequest) => void): Promise<ForwardResult> {
  const client = up.url.protocol === 'https:' ? https : http;
  const headers: http.OutgoingHttpHeaders = {
    'content-type': 'application/json',
    accept: stream ? 'text/event-stream' : 'application/json',
    'accept-encoding': 'identity',
    'content-length': payload.length,
    'user-agent': 'vcfleet-policy-gateway',
  };
  if (up.apiKey) headers.authorization = `Bearer ${up.apiKey}`;
  return new Promise<ForwardResult>((resolve) => {
    let reader: ResponseReader = new ResponseReader(false, false);
    let connected = false;
    let status: number | null = null;
    let settled = false;
    const finish = (extra: Partial<ForwardResult>): void => {
      if (settled) return;
      settled = true;
      clearTimeout(wholeTimer);
      clearTimeout(connectTimer);
      resolve({ connected, status, response: reader.finish(status), chunks: reader.chunks, ...extra });
    };
    const fail = (err: unknown): void => {
      if (settled) return;
      if (res.writableEnded || res.destroyed) return finish({ clientAborted: true });
      const { kind, reason } = classifyUpstreamError(err);
      sendJson(res, kind === 'timeout' ? 504 : 502, `policy gateway: the policy server is unreachable: ${reason}`, 'upstream_error');
      finish({ upstreamError: reason, upstreamErrorKind: kind });
    };
    const upReq = client.request(
      { protocol: up.url.protocol, hostname: up.url.hostname, port: up.url.port || undefined, method: 'POST', path: `${up.prefix}/chat/completions`, headers, agent: up.agent },
      (upRes) => {
        clearTimeout(connectTimer);
        connected = true;
        status = upRes.statusCode ?? 502;
        const isSse = /text\/event-stream/i.test(String(upRes.headers['content-type'] ?? ''));
        reader = new ResponseReader(isSse, keepChunks && isSse);
        const back: http.OutgoingHttpHeaders = {};
        for (const h of RESPONSE_HEADERS) if (upRes.headers[h] !== undefined) back[h] = upRes.headers[h];
        res.writeHead(status, back);
        upRes.on('data', (chunk: Buffer) => {
          reader.push(chunk);
          // A sandbox that reads slowly slows the stream down instead of filling the worker's memory.
          if (!res.destroyed && !res.write(chunk)) {
            upRes.pause();
            res.once('drain', () => upRes.resume());
          }
        });
        upRes.on('end', () => {
          res.end();
          finish({});
        });
        upRes.on('error', (err) => {
          res.destroy();
          const { kind, reason } = classifyUpstreamError(err);
          finish({ upstreamError: `${reason} (mid-response)`, upstreamErrorKind: kind });
        });
      },
    );
    onOpen(upReq);
    const wholeTimer = setTimeout(() => upReq.destroy(codedError('UPSTREAM_TIMEOUT', `no complete answer within ${up.requestTimeoutMs} ms`)), up.requestTimeoutMs);
    let connectTimer: NodeJS.Timeout | undefined;
    upReq.on('socket', (socket) => {
      if (!(socket as { connecting?: boolean }).connecting) {
        connected = true;
        return;
      }
      connectTimer = setTimeout(() => upReq.destroy(codedError('CONNECT_TIMEOUT', `could not connect within ${up.connectTimeoutMs} ms`)), up.connectTimeoutMs);
      socket.once('connect', () => {
        connected = true;
        clearTimeout(connectTimer);
      });
    });
    upReq.on('error', fail);
    // The sandbox hung up early (OpenCode's own request timeout, or the session was killed).
    res.on('close', () => {
      if (settled || res.writableFinished) return;
      upReq.destroy();
      finish({ clientAborted: true });
    });
    upReq.end(payload);
  });
}
