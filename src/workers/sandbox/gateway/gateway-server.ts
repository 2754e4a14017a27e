/** The gateway server behind startPolicyGateway: its listeners, its budget and what it saw. */
import http from 'node:http';
import { rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { errorMessage } from '../../../shared/errors.ts';
import { createCallCapture, type CallCapture } from './call-capture.ts';
import { enforceChatPolicy, parseChatRequest, type ChatRequest } from './chat-request.ts';
import { emptyStats, recordCall, recordRefusal, type GatewayCall, type GatewayStats } from './call-stats.ts';
import { ConversationReader, ImageStore, type StoredImage } from './conversation.ts';
import { createUpstream, forwardChat, type Upstream } from './forward-call.ts';
import { listen, receiveBody, refuse } from './http-io.ts';
import { checkRequest, isRefusal, type Refusal } from './request-check.ts';
import type { PolicyGateway, PolicyGatewayOptions } from './policy-gateway.ts';

/** One gateway: its listeners, its budget and what it saw. */
export class GatewayServer implements PolicyGateway {
  private readonly upstream: Upstream;
  private readonly calls_: GatewayCall[] = [];
  private readonly store: ImageStore;
  private readonly conversation: ConversationReader;
  private readonly open = new Set<http.ClientRequest>();
  private readonly servers: http.Server[] = [];
  private capture: CallCapture | null = null;
  private stats_ = emptyStats();
  private inFlight = 0;
  /** Calls sent to the policy server so far (finished or not): the budget counts these. */
  private forwarded = 0;
  private budgetSpent = false;
  private closing: Promise<void> | null = null;
  tcpPort?: number;

  constructor(private readonly options: PolicyGatewayOptions) {
    this.upstream = createUpstream(options.upstreamBaseUrl, options.apiKey, options.requestTimeoutMs ?? 600_000, options.connectTimeoutMs ?? 15_000);
    this.store = new ImageStore(options.imageBudgetBytes ?? 32 * 1024 * 1024);
    this.conversation = new ConversationReader(this.store);
  }

  get socketPath(): string | undefined {
    return this.options.socketPath;
  }

  get calls(): readonly GatewayCall[] {
    return [...this.calls_].sort((a, b) => a.index - b.index);
  }

  get images(): ReadonlyMap<string, StoredImage> {
    return this.store.images;
  }

  stats(): GatewayStats {
    return this.stats_;
  }

  async start(): Promise<void> {
    const { socketPath, tcp, capture, logger } = this.options;
    this.capture = capture ? await createCallCapture({ ...capture, logger }) : null;
    if (socketPath) {
      await rm(socketPath, { force: true });
      this.servers.push(await listen(this.makeServer(), socketPath));
    }
    if (tcp) {
      const s = await listen(this.makeServer(), tcp.port, tcp.host);
      this.servers.push(s);
      this.tcpPort = (s.address() as AddressInfo).port;
    }
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const r of this.open) r.destroy();
      await Promise.all(this.servers.map((s) => new Promise<void>((resolve) => {
        s.close(() => resolve());
        s.closeAllConnections();
      })));
      this.upstream.agent.destroy();
      await this.capture?.flush();
      if (this.options.socketPath) await rm(this.options.socketPath, { force: true });
    })();
    return this.closing;
  }

  private makeServer(): http.Server {
    const server = http.createServer({ maxHeaderSize: 32 * 1024, requestTimeout: 120_000, headersTimeout: 30_000 }, (req, res) => this.onRequest(req, res));
    server.keepAliveTimeout = 5_000;
    // Bad request lines, oversized headers, garbage: one connection fails, nothing else.
    server.on('clientError', (_err, socket) => {
      this.stats_ = recordRefusal(this.stats_, 'malformed_http');
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      else socket.destroy();
    });
    return server;
  }

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    req.on('error', () => res.destroy());
    res.on('error', () => undefined);
    try {
      const kind = checkRequest(req.method, req.url, req.headers.authorization, this.options.accessToken);
      if (isRefusal(kind)) return this.refused(res, kind);
      if (kind.kind === 'models') return this.models(res);
      this.chat(req, res).catch((err: unknown) => {
        this.options.logger?.error({ err: errorMessage(err) }, 'policy gateway: a call failed unexpectedly');
        res.destroy();
      });
    } catch (err) {
      this.options.logger?.error({ err: errorMessage(err) }, 'policy gateway: a request failed unexpectedly');
      res.destroy();
    }
  }

  private refused(res: http.ServerResponse, r: Refusal, headers?: http.OutgoingHttpHeaders): void {
    this.stats_ = recordRefusal(this.stats_, r.reason);
    this.options.logger?.debug({ reason: r.reason }, 'policy gateway refused a request');
    refuse(res, r, headers);
  }

  private models(res: http.ServerResponse): void {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ object: 'list', data: [{ id: this.options.model, object: 'model', owned_by: 'policy' }] }));
  }

  private async chat(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const { limits } = this.options;
    if (this.inFlight >= limits.maxConcurrentCalls) {
      return this.refused(res, { reason: 'busy', status: 429, message: `policy gateway: at most ${limits.maxConcurrentCalls} calls at once` }, { 'retry-after': '1' });
    }
    this.inFlight++;
    try {
      const body = await this.checkedBody(req, res);
      if (body) await this.forward(body, res);
    } finally {
      this.inFlight--;
    }
  }

  /** The body to forward, rewritten; null when the request was refused (or the sandbox hung up). */
  private async checkedBody(req: http.IncomingMessage, res: http.ServerResponse): Promise<ChatRequest | null> {
    const { limits } = this.options;
    const raw = await receiveBody(req, limits.maxBodyBytes);
    if (raw === 'aborted') {
      res.destroy();
      return null;
    }
    if (raw === 'too_large') {
      this.refused(res, this.tooLarge());
      return null;
    }
    const parsed = parseChatRequest(raw);
    if (!parsed.ok) {
      this.refused(res, { reason: 'body', status: 400, message: `policy gateway: ${parsed.message}` });
      return null;
    }
    const over = this.overBudget();
    if (over) {
      this.refused(res, over);
      return null;
    }
    return enforceChatPolicy(parsed.body, { model: this.options.model, maxOutputTokens: this.options.maxOutputTokens });
  }

  private tooLarge(): Refusal {
    return { reason: 'too_large', status: 413, message: `policy gateway: request bodies are limited to ${this.options.limits.maxBodyBytes} bytes` };
  }

  /** A refusal when this rollout's calls are spent (telling the session once), else null. */
  private overBudget(): Refusal | null {
    const max = this.options.limits.maxCalls;
    if (this.forwarded < max) return null;
    if (!this.budgetSpent) this.options.onBudgetExhausted?.();
    this.budgetSpent = true;
    return { reason: 'budget', status: 400, message: `policy gateway: this rollout's ${max} policy calls are spent` };
  }

  private async forward(body: ChatRequest, res: http.ServerResponse): Promise<void> {
    const request = this.conversation.read(body.messages);
    const index = this.forwarded++;
    const started = Date.now();
    const result = await forwardChat(this.upstream, Buffer.from(JSON.stringify(body)), body.stream === true, res, this.capture !== null, (r) => {
      this.open.add(r);
      r.once('close', () => this.open.delete(r));
    });
    const call: GatewayCall = {
      index, startedAt: new Date(started).toISOString(), latencyMs: Date.now() - started, stream: body.stream === true,
      connected: result.connected, status: result.status, response: result.response, request,
      ...(result.upstreamError !== undefined ? { upstreamError: result.upstreamError, upstreamErrorKind: result.upstreamErrorKind } : {}),
      ...(result.clientAborted ? { clientAborted: true } : {}),
    };
    this.calls_.push(call);
    this.stats_ = recordCall(this.stats_, call, Date.now());
    if (call.upstreamError) this.options.logger?.warn({ reason: call.upstreamError }, 'policy gateway cannot reach the policy server');
    this.capture?.write({ call: { ...call, request: undefined }, request: body, response: result.chunks ?? result.response });
    this.options.onCall?.(call, this.stats_);
  }
}

