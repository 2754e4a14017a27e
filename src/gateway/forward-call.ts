/**
 * Forwarding one checked chat call to the policy server: the real key added, only the headers a chat
 * call needs, the answer streamed back to the sandbox as it arrives and read on the way (text, tool
 * calls, finish reason, usage). Connection failures, timeouts and hang-ups become facts of the call,
 * never exceptions.
 */
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { classifyUpstreamError, codedError, isStalePooledReset, type UpstreamErrorKind } from './upstream-errors.ts';
import { ResponseReader, type AssembledResponse } from './response-reader.ts';
import { askedWaitMs, isBackpressure, isQuotaGone } from '../pacing/index.ts';

/** Bytes of a held 429/503 answer read before it is passed on as it is (a real one is a small JSON error). */
const HELD_BODY_MAX_BYTES = 64 * 1024;

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
  /** A connection to the policy server was open for this call (the server could accept it). */
  connected: boolean;
  /** Upstream HTTP status; null when the policy server was not reached or did not answer. */
  status: number | null;
  /** Why the policy server could not be reached or did not answer (no secrets). */
  upstreamError?: string;
  upstreamErrorKind?: UpstreamErrorKind;
  /** The sandbox side hung up before the call finished (OpenCode's own request timeout, or a kill). */
  clientAborted?: boolean;
  /**
   * The deadline came while the answer waited for the sandbox to read it: the sandbox stalled, not the
   * policy server (never counted against the server).
   */
  clientStalled?: boolean;
  /** The answer as the gateway assembled it (text, tool calls, finish reason, usage, error body). */
  response: AssembledResponse;
  /** Parsed SSE chunks, when asked for (capture). */
  chunks: unknown[] | null;
  /**
   * With `hold`: the server pushed back (429, or 503 with Retry-After) and nothing was sent to the
   * sandbox; the caller waits (`retryAfterMs` is what the server asked for, capped) and sends again.
   */
  backpressure?: { status: number; retryAfterMs: number | null };
  /** A 429 that says the key's quota is gone (passed on to the sandbox as it came). */
  quotaGone?: boolean;
  /** A pooled connection the server had closed failed before any answer: the call was sent again on a fresh one. */
  freshRetry?: boolean;
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

function requestHeaders(up: Upstream, payload: Buffer, stream: boolean): http.OutgoingHttpHeaders {
  const headers: http.OutgoingHttpHeaders = {
    'content-type': 'application/json',
    accept: stream ? 'text/event-stream' : 'application/json',
    'accept-encoding': 'identity',
    'content-length': payload.length,
    'user-agent': 'vcfleet-policy-gateway',
  };
  if (up.apiKey) headers.authorization = `Bearer ${up.apiKey}`;
  return headers;
}

/** One call on its way: the upstream request, its timers, and what came back so far. */
class ForwardedCall {
  private reader: ResponseReader;
  private connected = false;
  /** The answer is paused until the sandbox reads what was sent (backpressure). */
  private waitingForClient = false;
  private status: number | null = null;
  private settled = false;
  private wholeTimer: NodeJS.Timeout | undefined;
  private connectTimer: NodeJS.Timeout | undefined;
  private upReq: http.ClientRequest | null = null;
  private retried = false;
  private send: ((agent: http.Agent | false) => void) | null = null;

  constructor(
    private readonly up: Upstream,
    private readonly res: http.ServerResponse,
    private readonly keepChunks: boolean,
    private readonly assemble: boolean,
    private readonly hold: boolean,
    private readonly resolve: (r: ForwardResult) => void,
  ) {
    this.reader = new ResponseReader(false, false, assemble);
  }

  start(payload: Buffer, stream: boolean, onOpen: (r: http.ClientRequest) => void): void {
    const { up } = this;
    const client = up.url.protocol === 'https:' ? https : http;
    this.send = (agent) => {
      const upReq = client.request(
        { protocol: up.url.protocol, hostname: up.url.hostname, port: up.url.port || undefined, method: 'POST', path: `${up.prefix}/chat/completions`, headers: requestHeaders(up, payload, stream), agent },
        (upRes) => this.onResponse(upRes),
      );
      this.upReq = upReq;
      onOpen(upReq);
      upReq.on('socket', (socket) => this.onSocket(socket));
      upReq.on('error', (err) => this.fail(upReq, err));
      upReq.end(payload);
    };
    this.wholeTimer = setTimeout(() => this.deadline(this.upReq!), up.requestTimeoutMs);
    // The sandbox hung up early (OpenCode's own request timeout, or the session was killed).
    this.res.on('close', () => {
      if (this.settled || this.res.writableFinished) return;
      this.upReq?.destroy();
      this.finish({ clientAborted: true });
    });
    this.send(up.agent);
  }

  /** The call's time is up: the policy server's fault, unless the answer was waiting on the sandbox. */
  private deadline(upReq: http.ClientRequest): void {
    if (!this.waitingForClient) {
      upReq.destroy(codedError('UPSTREAM_TIMEOUT', `no complete answer within ${this.up.requestTimeoutMs} ms`));
      return;
    }
    this.res.destroy();
    upReq.destroy();
    this.finish({ clientStalled: true });
  }

  private onSocket(socket: Socket): void {
    if (!(socket as { connecting?: boolean }).connecting) {
      this.connected = true;
      return;
    }
    this.connectTimer = setTimeout(() => this.upReq?.destroy(codedError('CONNECT_TIMEOUT', `could not connect within ${this.up.connectTimeoutMs} ms`)), this.up.connectTimeoutMs);
    socket.once('connect', () => {
      this.connected = true;
      clearTimeout(this.connectTimer);
    });
  }

  private onResponse(upRes: http.IncomingMessage): void {
    clearTimeout(this.connectTimer);
    this.connected = true;
    this.status = upRes.statusCode ?? 502;
    const isSse = /text\/event-stream/i.test(String(upRes.headers['content-type'] ?? ''));
    this.reader = new ResponseReader(isSse, this.keepChunks && isSse, this.assemble);
    if (this.hold && isBackpressure(this.status, upRes.headers)) return this.readHeld(upRes);
    this.pipe(upRes);
  }

  /** A 429/503 of a call the gateway holds: read (bounded) before anything reaches the sandbox. */
  private readHeld(upRes: http.IncomingMessage): void {
    const status = this.status!;
    const chunks: Buffer[] = [];
    let bytes = 0;
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      bytes += chunk.length;
      // Not a plain error body: pass it on as any answer.
      if (bytes > HELD_BODY_MAX_BYTES) passOn();
    };
    const passOn = () => {
      upRes.off('data', onData);
      upRes.off('end', onEnd);
      upRes.pause();
      this.pipe(upRes, chunks);
      upRes.resume();
    };
    const onEnd = () => {
      for (const c of chunks) this.reader.push(c);
      const peek = new ResponseReader(false, false, true);
      for (const c of chunks) peek.push(c);
      if (status === 429 && isQuotaGone(peek.finish(status).errorCode)) {
        this.writeBack(upRes);
        for (const c of chunks) this.res.write(c);
        this.res.end();
        return this.finish({ quotaGone: true });
      }
      upRes.destroy();
      this.finish({ backpressure: { status, retryAfterMs: askedWaitMs(upRes.headers) } });
    };
    upRes.on('data', onData);
    upRes.on('end', onEnd);
    upRes.on('error', (err) => {
      const { kind, reason } = classifyUpstreamError(err);
      sendJson(this.res, 502, `policy gateway: the policy server cut its answer: ${reason}`, 'upstream_error');
      this.finish({ upstreamError: `${reason} (mid-response)`, upstreamErrorKind: kind });
    });
  }

  private writeBack(upRes: http.IncomingMessage): void {
    const back: http.OutgoingHttpHeaders = {};
    for (const h of RESPONSE_HEADERS) if (upRes.headers[h] !== undefined) back[h] = upRes.headers[h];
    this.res.writeHead(this.status!, back);
  }

  /** Stream the answer to the sandbox as it arrives (after `first`, what was read of it already). */
  private pipe(upRes: http.IncomingMessage, first: Buffer[] = []): void {
    const { res } = this;
    this.writeBack(upRes);
    for (const c of first) {
      this.reader.push(c);
      res.write(c);
    }
    upRes.on('data', (chunk: Buffer) => {
      this.reader.push(chunk);
      // A sandbox that reads slowly slows the stream down instead of filling the worker's memory.
      if (!res.destroyed && !res.write(chunk)) {
        upRes.pause();
        this.waitingForClient = true;
        res.once('drain', () => {
          this.waitingForClient = false;
          upRes.resume();
        });
      }
    });
    upRes.on('end', () => {
      res.end();
      this.finish({});
    });
    upRes.on('error', (err) => {
      res.destroy();
      const { kind, reason } = classifyUpstreamError(err);
      this.finish({ upstreamError: `${reason} (mid-response)`, upstreamErrorKind: kind });
    });
  }

  private fail(upReq: http.ClientRequest, err: unknown): void {
    if (this.settled || upReq !== this.upReq) return;
    if (this.res.writableEnded || this.res.destroyed) return this.finish({ clientAborted: true });
    const { kind, reason } = classifyUpstreamError(err);
    if (isStalePooledReset(kind, upReq, this.status) && !this.retried && this.send) {
      this.retried = true;
      this.connected = false;
      clearTimeout(this.connectTimer);
      this.send(false);
      return;
    }
    sendJson(this.res, kind === 'timeout' ? 504 : 502, `policy gateway: the policy server is unreachable: ${reason}`, 'upstream_error');
    this.finish({ upstreamError: reason, upstreamErrorKind: kind });
  }

  private finish(extra: Partial<ForwardResult>): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.wholeTimer);
    clearTimeout(this.connectTimer);
    this.resolve({
      connected: this.connected, status: this.status, response: this.reader.finish(this.status), chunks: this.reader.chunks,
      ...(this.retried ? { freshRetry: true } : {}), ...extra,
    });
  }
}

export interface ForwardOptions {
  /** Keep the parsed SSE chunks (capture). */
  keepChunks: boolean;
  /** Read the answer (text, tool calls, usage); false for a call that is not the agent's. */
  assemble: boolean;
  onOpen: (r: http.ClientRequest) => void;
  /** Hold back-pressure (429, 503 with Retry-After) instead of passing it on: see `ForwardResult.backpressure`. */
  hold?: boolean;
}

/** Forward `payload` (an already checked and rewritten chat body) and pipe the answer to `res`. */
export function forwardChat(up: Upstream, payload: Buffer, stream: boolean, res: http.ServerResponse, options: ForwardOptions): Promise<ForwardResult> {
  return new Promise<ForwardResult>((resolve) => new ForwardedCall(up, res, options.keepChunks, options.assemble, options.hold === true, resolve).start(payload, stream, options.onOpen));
}
