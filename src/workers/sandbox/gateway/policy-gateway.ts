/**
 * The per-rollout policy gateway: the only door out of a sandbox. OpenCode (and anything else the
 * model runs) reaches it over a Unix socket bridged into the sandbox, or over TCP. It is a strict
 * allowlist proxy: `POST /v1/chat/completions` with a body that parses as a chat call is forwarded
 * to the worker's policy endpoint with the real key (which never enters the sandbox), the model set
 * to the policy model and the output capped; `GET /v1/models` is answered here; everything else is
 * refused with a 4xx and counted. Bodies, concurrent calls and calls per rollout are bounded, and no
 * input, however malformed, can throw past the connection it came on.
 *
 * Each forwarded call is recorded as the gateway saw it (status, connection, the assembled answer,
 * what the request added to the conversation): the rollout's outcome and transcript come from here.
 */
import http from 'node:http';
import { rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../../shared/logger.ts';
import { errorMessage } from '../../../shared/errors.ts';
import { createCallCapture } from './call-capture.ts';
import { enforceChatPolicy, parseChatRequest } from './chat-request.ts';
import { emptyStats, recordCall, recordRefusal, type GatewayCall, type GatewayStats } from './call-stats.ts';
import { ConversationReader, ImageStore, type StoredImage } from './conversation.ts';
import { createUpstream, forwardChat } from './forward-call.ts';
import { checkRequest, isRefusal, type Refusal } from './request-check.ts';

export type { GatewayCall, GatewayStats } from './call-stats.ts';

export interface GatewayLimits {
  /** Largest request body, in bytes (the history, images included, is re-sent on every call). */
  maxBodyBytes: number;
  /** Calls in flight at once; more are answered 429. */
  maxConcurrentCalls: number;
  /** Calls forwarded per rollout; the next one is refused and `onBudgetExhausted` fires. */
  maxCalls: number;
}

export interface PolicyGatewayOptions {
  /** The policy endpoint chosen by the worker's own configuration, e.g. `http://vllm:8000/v1`. */
  upstreamBaseUrl: string;
  /** The real API key; added as `Authorization: Bearer ...`. Null: no Authorization header upstream. */
  apiKey: string | null;
  /** The policy model: every forwarded call asks for it, whatever the sandbox wrote. */
  model: string;
  /** Output cap per call, in tokens. */
  maxOutputTokens: number;
  /** The sandbox must present `Authorization: Bearer <accessToken>` (a per-rollout dummy key). */
  accessToken: string;
  limits: GatewayLimits;
  /** Listen on this Unix socket (created; removed on close). */
  socketPath?: string;
  /** Also (or instead) listen on TCP; port 0 picks a free port. */
  tcp?: { host: string; port: number };
  /** Give up on one upstream call after this long (ms) and answer 504; default 10 min. */
  requestTimeoutMs?: number;
  /** Give up connecting to the policy server after this long (ms); default 15 s. */
  connectTimeoutMs?: number;
  /** Bytes of images kept for the transcript (each image once); default 32 MiB. */
  imageBudgetBytes?: number;
  /** Append each call's request and response to this JSONL file (images stored once in `imageDir`). */
  capture?: { path: string; imageDir?: string } | null;
  logger?: Logger;
  /** Called after each forwarded call is complete (for live health checks). */
  onCall?: (call: GatewayCall, stats: GatewayStats) => void;
  /** Called once when the call budget (`limits.maxCalls`) is spent. */
  onBudgetExhausted?: () => void;
}

export interface PolicyGateway {
  readonly socketPath?: string;
  /** Port of the TCP listener, when `tcp` was given. */
  readonly tcpPort?: number;
  /** The finished forwarded calls, in the order they were sent. */
  readonly calls: readonly GatewayCall[];
  /** The images the model was shown, by SHA-256. */
  readonly images: ReadonlyMap<string, StoredImage>;
  stats(): GatewayStats;
  /** Stop listening, cut open calls, flush the capture file and remove the socket. Safe to call twice. */
  close(): Promise<void>;
}

function refuse(res: http.ServerResponse, r: Refusal, extraHeaders: http.OutgoingHttpHeaders = {}): void {
  if (res.headersSent || res.destroyed) return void res.destroy();
  res.writeHead(r.status, { 'content-type': 'application/json', connection: 'close', ...extraHeaders });
  res.end(JSON.stringify({ error: { message: r.message, type: 'policy_gateway_refused', code: r.reason } }));
}

/** The body, or why it was not read: larger than `max`, or the sandbox hung up. */
function receiveBody(req: http.IncomingMessage, max: number): Promise<Buffer | 'too_large' | 'aborted'> {
  return new Promise((resolve) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > max) return resolve('too_large');
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        req.removeAllListeners('data');
        req.pause();
        resolve('too_large');
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => resolve('aborted'));
    req.on('aborted', () => resolve('aborted'));
  });
}

export async function startPolicyGateway(options: PolicyGatewayOptions): Promise<PolicyGateway> {
  if (!options.socketPath && !options.tcp) throw new Error('policy gateway needs a socketPath or a tcp listener');
  const { limits, logger } = options;
  const upstream = createUpstream(options.upstreamBaseUrl, options.apiKey, options.requestTimeoutMs ?? 600_000, options.connectTimeoutMs ?? 15_000);
  const calls: GatewayCall[] = [];
  const store = new ImageStore(options.imageBudgetBytes ?? 32 * 1024 * 1024);
  const conversation = new ConversationReader(store);
  const open = new Set<http.ClientRequest>();
  const capture = options.capture ? await createCallCapture({ ...options.capture, logger }) : null;
  let stats = emptyStats();
  let inFlight = 0;
  /** Calls sent to the policy server so far (finished or not): the budget counts these. */
  let forwarded = 0;
  let budgetSpent = false;

  const refused = (res: http.ServerResponse, r: Refusal, headers?: http.OutgoingHttpHeaders): void => {
    stats = recordRefusal(stats, r.reason);
    logger?.debug({ reason: r.reason }, 'policy gateway refused a request');
    refuse(res, r, headers);
  };

  async function chat(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (inFlight >= limits.maxConcurrentCalls) {
      return refused(res, { reason: 'busy', status: 429, message: `policy gateway: at most ${limits.maxConcurrentCalls} calls at once` }, { 'retry-after': '1' });
    }
    inFlight++;
    try {
      const raw = await receiveBody(req, limits.maxBodyBytes);
      if (raw === 'aborted') return void res.destroy();
      if (raw === 'too_large') return refused(res, { reason: 'too_large', status: 413, message: `policy gateway: request bodies are limited to ${limits.maxBodyBytes} bytes` });
      const parsed = parseChatRequest(raw);
      if (!parsed.ok) return refused(res, { reason: 'body', status: 400, message: `policy gateway: ${parsed.message}` });
      if (forwarded >= limits.maxCalls) {
        if (!budgetSpent) options.onBudgetExhausted?.();
        budgetSpent = true;
        return refused(res, { reason: 'budget', status: 400, message: `policy gateway: this rollout's ${limits.maxCalls} policy calls are spent` });
      }
      const body = enforceChatPolicy(parsed.body, { model: options.model, maxOutputTokens: options.maxOutputTokens });
      const request = conversation.read(body.messages);
      const index = forwarded++;
      const started = Date.now();
      const result = await forwardChat(upstream, Buffer.from(JSON.stringify(body)), body.stream === true, res, capture !== null, (r) => {
        open.add(r);
        r.once('close', () => open.delete(r));
      });
      const call: GatewayCall = {
        index, startedAt: new Date(started).toISOString(), latencyMs: Date.now() - started, stream: body.stream === true,
        connected: result.connected, status: result.status, response: result.response, request,
        ...(result.upstreamError !== undefined ? { upstreamError: result.upstreamError, upstreamErrorKind: result.upstreamErrorKind } : {}),
        ...(result.clientAborted ? { clientAborted: true } : {}),
      };
      calls.push(call);
      stats = recordCall(stats, call, Date.now());
      if (call.upstreamError) logger?.warn({ reason: call.upstreamError }, 'policy gateway cannot reach the policy server');
      capture?.write({ call: { ...call, request: undefined }, request: body, response: result.chunks ?? result.response });
      options.onCall?.(call, stats);
    } finally {
      inFlight--;
    }
  }

  function models(res: http.ServerResponse): void {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ object: 'list', data: [{ id: options.model, object: 'model', owned_by: 'policy' }] }));
  }

  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    req.on('error', () => res.destroy());
    res.on('error', () => undefined);
    try {
      const kind = checkRequest(req.method, req.url, req.headers.authorization, options.accessToken);
      if (isRefusal(kind)) return refused(res, kind);
      if (kind.kind === 'models') return models(res);
      chat(req, res).catch((err: unknown) => {
        logger?.error({ err: errorMessage(err) }, 'policy gateway: a call failed unexpectedly');
        res.destroy();
      });
    } catch (err) {
      logger?.error({ err: errorMessage(err) }, 'policy gateway: a request failed unexpectedly');
      res.destroy();
    }
  };

  const makeServer = (): http.Server => {
    const server = http.createServer({ maxHeaderSize: 32 * 1024, requestTimeout: 120_000, headersTimeout: 30_000 }, onRequest);
    server.keepAliveTimeout = 5_000;
    // Bad request lines, oversized headers, garbage: one connection fails, nothing else.
    server.on('clientError', (_err, socket) => {
      stats = recordRefusal(stats, 'malformed_http');
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      else socket.destroy();
    });
    return server;
  };
  const servers: http.Server[] = [];
  if (options.socketPath) {
    await rm(options.socketPath, { force: true });
    servers.push(await listen(makeServer(), options.socketPath));
  }
  let tcpPort: number | undefined;
  if (options.tcp) {
    const s = await listen(makeServer(), options.tcp.port, options.tcp.host);
    servers.push(s);
    tcpPort = (s.address() as AddressInfo).port;
  }

  let closing: Promise<void> | null = null;
  return {
    socketPath: options.socketPath,
    tcpPort,
    get calls() {
      return [...calls].sort((a, b) => a.index - b.index);
    },
    images: store.images,
    stats: () => stats,
    close() {
      closing ??= (async () => {
        for (const r of open) r.destroy();
        await Promise.all(servers.map((s) => new Promise<void>((resolve) => {
          s.close(() => resolve());
          s.closeAllConnections();
        })));
        upstream.agent.destroy();
        await capture?.flush();
        if (options.socketPath) await rm(options.socketPath, { force: true });
      })();
      return closing;
    },
  };
}

function listen(server: http.Server, portOrPath: number | string, host?: string): Promise<http.Server> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    const done = () => {
      server.off('error', reject);
      resolve(server);
    };
    if (typeof portOrPath === 'string') server.listen(portOrPath, done);
    else server.listen(portOrPath, host, done);
  });
}
