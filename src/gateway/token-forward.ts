/**
 * Forwarding one call with token capture on: asked upstream without streaming (token-request.ts),
 * the whole answer read within a bound, its token fields taken out (token-fields.ts), and the answer
 * given to OpenCode as it asked for it: a stream the gateway makes itself (sse-reply.ts), or the JSON
 * without the token fields. Connection failures, timeouts and hang-ups become facts of the call, as
 * in forward-call.ts, never exceptions.
 */
import { askedWaitMs, isBackpressure, isQuotaGone } from '../pacing/index.ts';
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { ForwardResult, Upstream } from './forward-call.ts';
import { ResponseReader } from './response-reader.ts';
import { sseFromCompletion } from './sse-reply.ts';
import { readTokenFields, withoutTokenFields, type TokenFields } from '../shared/records/token-fields.ts';
import { classifyUpstreamError, codedError, isStalePooledReset } from './upstream-errors.ts';

/** Largest answer read from the policy server, in bytes (token ids of a long prompt included). */
export const MAX_TOKEN_ANSWER_BYTES = 64 * 1024 * 1024;

export interface TokenForwardResult {
  result: ForwardResult;
  /** The token fields of a 2xx answer; null when there was none. */
  tokens: TokenFields | null;
}

type Json = Record<string, unknown>;

function parseJson(raw: Buffer): Json | null {
  try {
    const v: unknown = JSON.parse(raw.toString('utf8'));
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : null;
  } catch {
    return null;
  }
}

/**
 * Forward `payload` (already shaped by upstreamBody) and answer `res` once the whole answer is in.
 * With `hold` (a call the gateway holds on the agent's behalf), a 429 or a 503 with Retry-After is
 * not passed on: the result says so (`backpressure`) for sendHeld to wait and send again; a 429
 * whose quota is gone for good is passed on and flagged (`quotaGone`).
 */
export function forwardForTokens(up: Upstream, payload: Buffer, clientStream: boolean, res: http.ServerResponse, onOpen: (r: http.ClientRequest) => void, hold = false): Promise<TokenForwardResult> {
  return new Promise((resolve) => {
    let settled = false;
    let connected = false;
    let status: number | null = null;
    let connectTimer: NodeJS.Timeout | undefined;
    const finish = (extra: Partial<ForwardResult>, body: Buffer | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(wholeTimer);
      clearTimeout(connectTimer);
      const reader = new ResponseReader(false);
      if (body) reader.push(body);
      const response = reader.finish(status);
      const json = body && status !== null && status >= 200 && status < 300 ? parseJson(body) : null;
      resolve({ result: { connected, status, response, chunks: null, ...(retried ? { freshRetry: true } : {}), ...extra }, tokens: json ? readTokenFields(json) : null });
      if (extra.upstreamError === undefined && !extra.clientAborted && body) reply(json, body);
    };
    const reply = (json: Json | null, body: Buffer) => {
      if (res.destroyed || res.headersSent) return;
      if (json && clientStream) {
        res.writeHead(status!, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.end(sseFromCompletion(json));
      } else {
        res.writeHead(status!, { 'content-type': 'application/json' });
        res.end(json ? JSON.stringify(withoutTokenFields(json)) : body);
      }
    };
    const fail = (failed: http.ClientRequest, err: unknown) => {
      if (settled || failed !== upReq) return;
      if (res.writableEnded || res.destroyed) return finish({ clientAborted: true }, null);
      const { kind, reason } = classifyUpstreamError(err);
      if (isStalePooledReset(kind, failed, status) && !retried) {
        retried = true;
        connected = false;
        clearTimeout(connectTimer);
        send(false);
        return;
      }
      if (!res.headersSent) {
        res.writeHead(kind === 'timeout' ? 504 : 502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `policy gateway: the policy server is unreachable: ${reason}`, type: 'upstream_error' } }));
      }
      finish({ upstreamError: reason, upstreamErrorKind: kind }, null);
    };
    let retried = false;
    const client = up.url.protocol === 'https:' ? https : http;
    const headers: http.OutgoingHttpHeaders = {
      'content-type': 'application/json', accept: 'application/json', 'accept-encoding': 'identity', 'content-length': payload.length, 'user-agent': 'vcfleet-policy-gateway',
    };
    if (up.apiKey) headers.authorization = `Bearer ${up.apiKey}`;
    let upReq: http.ClientRequest;
    const send = (agent: http.Agent | false) => {
      const req = client.request(
        { protocol: up.url.protocol, hostname: up.url.hostname, port: up.url.port || undefined, method: 'POST', path: `${up.prefix}/chat/completions`, headers, agent },
        (upRes) => {
          clearTimeout(connectTimer);
          connected = true;
          status = upRes.statusCode ?? 502;
          const chunks: Buffer[] = [];
          let size = 0;
          upRes.on('data', (c: Buffer) => {
            size += c.length;
            if (size > MAX_TOKEN_ANSWER_BYTES) req.destroy(codedError('ANSWER_TOO_LARGE', `the answer is larger than ${MAX_TOKEN_ANSWER_BYTES} bytes`));
            else chunks.push(c);
          });
          upRes.on('end', () => {
            const body = Buffer.concat(chunks);
            if (!hold || !isBackpressure(status!, upRes.headers)) return finish({}, body);
            const peek = new ResponseReader(false);
            peek.push(body);
            if (status === 429 && isQuotaGone(peek.finish(status).errorCode)) return finish({ quotaGone: true }, body);
            finish({ backpressure: { status: status!, retryAfterMs: askedWaitMs(upRes.headers) } }, null);
          });
          upRes.on('error', (err) => fail(req, err));
        },
      );
      upReq = req;
      onOpen(req);
      req.on('socket', (socket: Socket) => {
        if (!(socket as { connecting?: boolean }).connecting) {
          connected = true;
          return;
        }
        connectTimer = setTimeout(() => req.destroy(codedError('CONNECT_TIMEOUT', `could not connect within ${up.connectTimeoutMs} ms`)), up.connectTimeoutMs);
        socket.once('connect', () => {
          connected = true;
          clearTimeout(connectTimer);
        });
      });
      req.on('error', (err) => fail(req, err));
      req.end(payload);
    };
    const wholeTimer = setTimeout(() => upReq.destroy(codedError('UPSTREAM_TIMEOUT', `no complete answer within ${up.requestTimeoutMs} ms`)), up.requestTimeoutMs);
    res.on('close', () => {
      if (settled || res.writableFinished) return;
      upReq.destroy();
      finish({ clientAborted: true }, null);
    });
    send(up.agent);
  });
}
