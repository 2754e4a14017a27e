/**
 * The per-rollout policy gateway. OpenCode in the sandbox talks to it (over a Unix socket bridged
 * into the sandbox, or over TCP); it forwards every `/v1/...` call to the policy server, adding the
 * real API key, which therefore never enters the sandbox. Streaming responses pass through as they
 * arrive. Each call is recorded (status, latency, tokens); with `capture` the request and response
 * of each call are appended to a JSONL file. Upstream connection failures are answered with 502 and
 * counted separately, so the runner can tell "the policy server is unreachable" from model errors.
 */
import http from 'node:http';
import https from 'node:https';
import { rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../../shared/logger.ts';
import { createCallCapture } from './call-capture.ts';
import { SseUsageReader, usageFromJson } from './usage.ts';
import { classifyUpstreamError, codedError } from './upstream-errors.ts';
import { prepareForward } from './forward-request.ts';

export interface GatewayCall {
  index: number;
  method: string;
  path: string;
  startedAt: string;
  /** Upstream HTTP status; null when the policy server was not reached or did not answer. */
  status: number | null;
  latencyMs: number;
  stream: boolean;
  promptTokens: number | null;
  completionTokens: number | null;
  finishReason: string | null;
  /** Why the policy server could not be reached (connection refused, DNS, TLS, timeout, reset). */
  upstreamError?: string;
  /** The sandbox side hung up before the call finished (OpenCode's own request timeout, or a kill). */
  clientAborted?: boolean;
}

export interface GatewayStats {
  calls: number;
  /** Calls answered with a 2xx status. */
  successes: number;
  /** Calls that never reached the policy server or got no answer from it. */
  upstreamErrors: number;
  upstreamErrorReasons: Record<string, number>;
  /** Calls answered 5xx or 429 by the policy server (OpenCode retries these forever). */
  retryableStatuses: number;
  /** Failures (upstream errors, 5xx, 429) since the last success. */
  consecutiveFailures: number;
  /** Epoch ms of the first failure of the current run of failures, or null. */
  failingSince: number | null;
  lastSuccessAt: number | null;
  promptTokens: number;
  completionTokens: number;
}

export interface PolicyGatewayOptions {
  /** The policy server's base URL, e.g. `http://vllm:8000/v1`. */
  upstreamBaseUrl: string;
  /** The real API key; added as `Authorization: Bearer ...`. Null: no Authorization header upstream. */
  apiKey: string | null;
  /** Listen on this Unix socket (created; removed on close). */
  socketPath?: string;
  /** Also (or instead) listen on TCP; port 0 picks a free port. */
  tcp?: { host: string; port: number };
  /** When set, the sandbox must present `Authorization: Bearer <accessToken>` (a per-task dummy key). */
  accessToken?: string;
  /** Clamp `max_tokens` / `max_completion_tokens` of forwarded requests to this cap (and set it when absent). */
  maxOutputTokens?: number;
  /** Give up on one upstream call after this long (ms) and answer 504; default 10 min. */
  requestTimeoutMs?: number;
  /** Give up connecting to the policy server after this long (ms); default 15 s. */
  connectTimeoutMs?: number;
  /** Append each call's request and response to this JSONL file (images stored once in `imageDir`). */
  capture?: { path: string; imageDir?: string } | null;
  logger?: Logger;
  /** Called after each call is complete (for live health checks). */
  onCall?: (call: GatewayCall, stats: GatewayStats) => void;
}

export interface PolicyGateway {
  readonly socketPath?: string;
  /** Port of the TCP listener, when `tcp` was given. */
  readonly tcpPort?: number;
  readonly calls: readonly GatewayCall[];
  stats(): GatewayStats;
  /** Stop listening, cut open calls, flush the capture file and remove the socket. Safe to call twice. */
  close(): Promise<void>;
}

function sendJsonError(res: http.ServerResponse, status: number, message: string, type: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message, type } }));
}

export async function startPolicyGateway(options: PolicyGatewayOptions): Promise<PolicyGateway> {
  if (!options.socketPath && !options.tcp) throw new Error('policy gateway needs a socketPath or a tcp listener');
  const upstream = new URL(options.upstreamBaseUrl);
  const upstreamPrefix = upstream.pathname.replace(/\/+$/, '');
  const client = upstream.protocol === 'https:' ? https : http;
  const agent = new client.Agent({ keepAlive: true });
  const requestTimeoutMs = options.requestTimeoutMs ?? 600_000;
  const connectTimeoutMs = options.connectTimeoutMs ?? 15_000;
  const calls: GatewayCall[] = [];
  let nextIndex = 0;
  const open = new Set<http.ClientRequest>();
  const stats: GatewayStats = {
    calls: 0, successes: 0, upstreamErrors: 0, upstreamErrorReasons: {}, retryableStatuses: 0,
    consecutiveFailures: 0, failingSince: null, lastSuccessAt: null, promptTokens: 0, completionTokens: 0,
  };
  const capture = options.capture ? await createCallCapture({ ...options.capture, logger: options.logger }) : null;

  function finish(call: GatewayCall, captured?: { request: unknown; response: unknown }): void {
    calls.push(call);
    stats.calls++;
    const now = Date.now();
    const ok = call.status !== null && call.status >= 200 && call.status < 300 && !call.upstreamError;
    const failed = call.upstreamError !== undefined || (call.status !== null && (call.status >= 500 || call.status === 429));
    if (call.upstreamError) {
      stats.upstreamErrors++;
      const kind = call.upstreamError.split(' ')[0].replace(/:$/, '');
      stats.upstreamErrorReasons[kind] = (stats.upstreamErrorReasons[kind] ?? 0) + 1;
    } else if (failed) stats.retryableStatuses++;
    if (ok) {
      stats.successes++;
      stats.consecutiveFailures = 0;
      stats.failingSince = null;
      stats.lastSuccessAt = now;
    } else if (failed) {
      stats.consecutiveFailures++;
      stats.failingSince ??= now;
    }
    stats.promptTokens += call.promptTokens ?? 0;
    stats.completionTokens += call.completionTokens ?? 0;
    options.logger?.debug({ call }, 'policy call');
    if (capture && captured) capture.write({ call, ...captured });
    options.onCall?.(call, { ...stats, upstreamErrorReasons: { ...stats.upstreamErrorReasons } });
  }

  function handle(req: http.IncomingMessage, res: http.ServerResponse, raw: Buffer): void {
    const index = nextIndex++;
    const started = Date.now();
    const url = new URL(req.url ?? '/', 'http://gateway');
    const call: GatewayCall = {
      index, method: req.method ?? 'GET', path: url.pathname, startedAt: new Date(started).toISOString(),
      status: null, latencyMs: 0, stream: false, promptTokens: null, completionTokens: null, finishReason: null,
    };
    if (options.accessToken && req.headers.authorization !== `Bearer ${options.accessToken}`) {
      sendJsonError(res, 401, 'policy gateway: wrong or missing access token', 'authentication_error');
      return;
    }
    if (!/^\/v1(\/|$)/.test(url.pathname)) {
      sendJsonError(res, 404, `policy gateway: only /v1/... is forwarded, not ${url.pathname}`, 'not_found');
      return;
    }
    const { body, payload, headers } = prepareForward(req, raw, url.pathname, options.apiKey, options.maxOutputTokens);
    call.stream = body?.stream === true;

    let done = false;
    const responseChunks: Buffer[] = [];
    const sse = new SseUsageReader(Boolean(options.capture));
    const complete = (patch: Partial<GatewayCall>): void => {
      if (done) return;
      done = true;
      clearTimeout(wholeTimer);
      clearTimeout(connectTimer);
      open.delete(upstreamReq);
      Object.assign(call, patch, { latencyMs: Date.now() - started });
      let response: unknown = null;
      if (options.capture) {
        const text = Buffer.concat(responseChunks).toString('utf8');
        response = call.stream ? { sse: sse.chunks } : (() => { try { return JSON.parse(text) as unknown; } catch { return text; } })();
      }
      finish(call, { request: body ?? payload.toString('utf8'), response });
    };

    const upstreamReq = client.request(
      {
        protocol: upstream.protocol, hostname: upstream.hostname, port: upstream.port || undefined,
        method: req.method, path: upstreamPrefix + url.pathname.replace(/^\/v1/, '') + url.search, headers, agent,
      },
      (upRes) => {
        clearTimeout(connectTimer);
        call.status = upRes.statusCode ?? 502;
        const isSse = /text\/event-stream/.test(String(upRes.headers['content-type'] ?? ''));
        call.stream = call.stream || isSse;
        const resHeaders = { ...upRes.headers };
        delete resHeaders.connection;
        delete resHeaders['keep-alive'];
        res.writeHead(call.status, resHeaders);
        upRes.on('data', (chunk: Buffer) => {
          if (isSse) sse.push(chunk);
          if (!isSse || options.capture) responseChunks.push(chunk);
        });
        upRes.pipe(res);
        upRes.on('end', () => {
          sse.end();
          const usage = isSse ? sse.usage : usageFromJson(Buffer.concat(responseChunks).toString('utf8'));
          complete({ promptTokens: usage.promptTokens, completionTokens: usage.completionTokens, finishReason: usage.finishReason });
        });
        upRes.on('error', (err) => {
          complete({ upstreamError: `${classifyUpstreamError(err).reason} (mid-response)` });
          res.destroy();
        });
      },
    );
    open.add(upstreamReq);
    const wholeTimer = setTimeout(
      () => upstreamReq.destroy(codedError('UPSTREAM_TIMEOUT', `no complete answer within ${requestTimeoutMs} ms`)),
      requestTimeoutMs,
    );
    let connectTimer: NodeJS.Timeout | undefined;
    upstreamReq.on('socket', (socket) => {
      if (!(socket as { connecting?: boolean }).connecting) return;
      connectTimer = setTimeout(
        () => upstreamReq.destroy(codedError('CONNECT_TIMEOUT', `could not connect within ${connectTimeoutMs} ms`)),
        connectTimeoutMs,
      );
      socket.once('connect', () => clearTimeout(connectTimer));
    });
    upstreamReq.on('error', (err) => {
      if (done) return;
      if (res.writableEnded || res.destroyed) {
        complete({ clientAborted: true });
        return;
      }
      const { reason } = classifyUpstreamError(err);
      const status = /^timeout/.test(reason) ? 504 : 502;
      options.logger?.warn({ reason, path: call.path }, 'policy gateway cannot reach the policy server');
      if (res.headersSent) res.destroy();
      else sendJsonError(res, status, `policy gateway: the policy server is unreachable: ${reason}`, 'upstream_error');
      complete({ status: call.status, upstreamError: reason });
    });
    // The sandbox hung up early (OpenCode's request timeout, or the session was killed).
    res.on('close', () => {
      if (done || res.writableFinished) return;
      complete({ clientAborted: true });
      upstreamReq.destroy();
    });
    upstreamReq.end(payload);
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, res, Buffer.concat(chunks)));
    req.on('error', () => res.destroy());
  });
  server.keepAliveTimeout = 5_000;
  const servers: http.Server[] = [server];

  if (options.socketPath) {
    await rm(options.socketPath, { force: true });
    await listen(server, options.socketPath);
  }
  let tcpPort: number | undefined;
  if (options.tcp) {
    const tcpServer = options.socketPath ? http.createServer(server.listeners('request')[0] as http.RequestListener) : server;
    if (tcpServer !== server) servers.push(tcpServer);
    await listen(tcpServer, options.tcp.port, options.tcp.host);
    tcpPort = (tcpServer.address() as AddressInfo).port;
  }

  let closing: Promise<void> | null = null;
  return {
    socketPath: options.socketPath,
    tcpPort,
    calls,
    stats: () => ({ ...stats, upstreamErrorReasons: { ...stats.upstreamErrorReasons } }),
    close() {
      closing ??= (async () => {
        for (const r of open) r.destroy();
        await Promise.all(
          servers.map((s) => new Promise<void>((resolve) => {
            s.close(() => resolve());
            s.closeAllConnections();
          })),
        );
        agent.destroy();
        await capture?.flush();
        if (options.socketPath) await rm(options.socketPath, { force: true });
      })();
      return closing;
    },
  };
}

function listen(server: http.Server, portOrPath: number | string, host?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    const done = () => {
      server.off('error', reject);
      resolve();
    };
    if (typeof portOrPath === 'string') server.listen(portOrPath, done);
    else server.listen(portOrPath, host, done);
  });
}
