/** The gateway server behind startPolicyGateway: its listeners, its budget and what it saw. */
import http from 'node:http';
import { rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { errorMessage } from '../shared/errors.ts';
import { createCallCapture, type CallCapture } from './call-capture.ts';
import { enforceChatPolicy, parseChatRequest, type ChatRequest } from './chat-request.ts';
import { emptyStats, isAnswered, recordCall, recordForged, recordHeld, recordRefusal, type GatewayCall, type GatewayStats } from './call-stats.ts';
import { ConversationReader, ConversationTracker, ImageStore, type CallOrigin, type StoredImage } from './conversation.ts';
import { createUpstream, forwardChat, type ForwardResult, type Upstream } from './forward-call.ts';
import { listen, receiveBody, refuse } from './http-io.ts';
import { KeptText } from './kept-text.ts';
import { busyRefusal, keptAgentCall } from './kept-call.ts';
import { sendHeld, WaitClock, type HoldEnd } from '../pacing/index.ts';
import { checkRequest, isRefusal, type Refusal } from './request-check.ts';
import type { PolicyGateway, PolicyGatewayOptions } from './gateway-options.ts';
import { forwardForTokens } from './token-forward.ts';
import type { TokenFields } from '../shared/records/token-fields.ts';
import { TokenRecorder, type TokenCaptureRecord } from './token-recorder.ts';
import { upstreamBody } from './token-request.ts';

/** Largest body of a call that is known not to be the agent's (it may still be forwarded, within this). */
const OTHER_MAX_BODY_BYTES = 16 * 1024 * 1024;
/** Tokens a first call is taken to cost against a tokens-per-minute limit, at most (later calls: the previous call's). */
const FIRST_CALL_TOKENS_MAX = 32_768;

/** One gateway: its listeners, its budget and what it saw. */
export class GatewayServer implements PolicyGateway {
  private readonly upstream: Upstream;
  private readonly calls_: GatewayCall[] = [];
  private readonly store: ImageStore;
  private readonly kept = new KeptText();
  private readonly conversation: ConversationReader;
  private readonly tracker = new ConversationTracker();
  private readonly open = new Set<http.ClientRequest>();
  private readonly servers: http.Server[] = [];
  private capture: CallCapture | null = null;
  /** With token capture: the calls' token ids and the chain (token-recorder.ts). */
  private readonly recorder: TokenRecorder | null;
  private stats_ = emptyStats();
  private inFlight = 0;
  /** Calls in flight known not to be the agent's: they never take the agent's last slot. */
  private otherInFlight = 0;
  /** Calls sent to the policy server so far (finished or not, the agent's or not): the budget counts these. */
  private forwarded = 0;
  private budgetSpent = false;
  private closing: Promise<void> | null = null;
  private readonly closed = new AbortController();
  private readonly waits = new WaitClock();
  /** Tokens of the agent's last answered call: what the next one is taken to cost against the pace. */
  private lastTokens: number | null = null;
  private waitExceeded = false;
  private quotaGone = false;
  tcpPort?: number;

  constructor(private readonly options: PolicyGatewayOptions) {
    const { settings, baseUrl, apiKey } = options.policy;
    // A little after OpenCode's own request timeout, so OpenCode reports it first.
    this.upstream = createUpstream(baseUrl, apiKey, options.requestTimeoutMs ?? settings.request_timeout_s * 1000 + 5_000, options.connectTimeoutMs ?? 15_000);
    this.store = new ImageStore(options.imageBudgetBytes);
    this.conversation = new ConversationReader(this.store, this.kept);
    this.recorder = settings.token_capture ? new TokenRecorder(settings) : null;
  }

  get tokenCapture(): TokenCaptureRecord | null {
    return this.recorder?.record() ?? null;
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

  /** Parts of the record were cut to keep the rollout's text, images or lists within their bounds. */
  get cut(): string[] {
    const notes: string[] = [];
    if (this.kept.cut) notes.push("text past the rollout's transcript budget was cut to its head and tail");
    if (this.store.dropped > 0) notes.push(`${this.store.dropped} image(s) past the rollout's image count were not recorded`);
    return notes;
  }

  stats = (): GatewayStats => this.stats_;
  policyWaitS = (): number => this.waits.totalMs() / 1000;

  async start(): Promise<void> {
    const { socketPath, agentSocketPath, tcp, capture, logger } = this.options;
    this.capture = capture ? await createCallCapture({ ...capture, logger }) : null;
    // Where the provider tells the agent's connections apart, the shared socket gets only the others.
    const shared: CallOrigin = agentSocketPath ? 'other' : 'unknown';
    for (const [at, origin] of [[agentSocketPath, 'agent'], [socketPath, shared]] as const) {
      if (!at) continue;
      await rm(at, { force: true });
      this.servers.push(await listen(this.makeServer(origin), at));
    }
    if (tcp) {
      const s = await listen(this.makeServer('unknown'), tcp.port, tcp.host);
      this.servers.push(s);
      this.tcpPort = (s.address() as AddressInfo).port;
    }
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.closed.abort();
      for (const r of this.open) r.destroy();
      await Promise.all(this.servers.map((s) => new Promise<void>((resolve) => {
        s.close(() => resolve());
        s.closeAllConnections();
      })));
      this.upstream.agent.destroy();
      await this.capture?.flush();
      for (const at of [this.options.socketPath, this.options.agentSocketPath]) if (at) await rm(at, { force: true });
    })();
    return this.closing;
  }

  private makeServer(origin: CallOrigin): http.Server {
    const server = http.createServer({ maxHeaderSize: 32 * 1024, requestTimeout: 120_000, headersTimeout: 30_000 }, (req, res) => this.onRequest(req, res, origin));
    server.keepAliveTimeout = 5_000;
    // Bad request lines, oversized headers, garbage: one connection fails, nothing else.
    server.on('clientError', (_err, socket) => {
      this.stats_ = recordRefusal(this.stats_, 'malformed_http');
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      else socket.destroy();
    });
    return server;
  }

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse, origin: CallOrigin): void {
    req.on('error', () => res.destroy());
    res.on('error', () => undefined);
    try {
      const kind = checkRequest(req.method, req.url, req.headers.authorization, this.options.accessToken);
      if (isRefusal(kind)) return this.refused(res, kind);
      if (kind.kind === 'models') return this.models(res);
      this.chat(req, res, origin).catch((err: unknown) => {
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
    res.end(JSON.stringify({ object: 'list', data: [{ id: this.options.policy.model, object: 'model', owned_by: 'policy' }] }));
  }

  private async chat(req: http.IncomingMessage, res: http.ServerResponse, origin: CallOrigin): Promise<void> {
    const busy = busyRefusal(this.options.policy.settings.max_concurrent_calls, this.inFlight, this.otherInFlight, origin);
    if (busy) return this.refused(res, busy, { 'retry-after': '1' });
    this.inFlight++;
    if (origin === 'other') this.otherInFlight++;
    try {
      const body = await this.checkedBody(req, res, origin);
      if (body) await this.forward(body, res, origin);
    } finally {
      this.inFlight--;
      if (origin === 'other') this.otherInFlight--;
    }
  }

  /** The body to forward, rewritten; null when the request was refused (or the sandbox hung up). */
  private async checkedBody(req: http.IncomingMessage, res: http.ServerResponse, origin: CallOrigin): Promise<ChatRequest | null> {
    const bodyMax = this.options.policy.settings.max_request_mib * 1024 * 1024;
    const max = origin === 'other' ? Math.min(OTHER_MAX_BODY_BYTES, bodyMax) : bodyMax;
    const raw = await receiveBody(req, max);
    if (raw === 'aborted') {
      res.destroy();
      return null;
    }
    if (raw === 'too_large') {
      this.refused(res, { reason: 'too_large', status: 413, message: `policy gateway: request bodies are limited to ${max} bytes` });
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
    return enforceChatPolicy(parsed.body, { model: this.options.policy.model, maxOutputTokens: this.options.policy.settings.max_output_tokens });
  }

  /** A refusal when this rollout's calls are spent (telling the session once), else null. */
  private overBudget(): Refusal | null {
    const max = this.options.policy.settings.max_calls_per_rollout;
    if (this.forwarded < max) return null;
    if (!this.budgetSpent) this.options.onBudgetExhausted?.();
    this.budgetSpent = true;
    return { reason: 'budget', status: 400, message: `policy gateway: this rollout's ${max} policy calls are spent` };
  }

  private async forward(body: ChatRequest, res: http.ServerResponse, origin: CallOrigin): Promise<void> {
    const agent = this.tracker.isAgentCall(body.messages, origin);
    const index = this.forwarded++;
    if (!agent) return this.forwardForged(index, body, res, origin);
    this.tracker.started(body.messages, origin);
    const request = this.conversation.read(body.messages);
    const started = Date.now();
    const shaped = upstreamBody(this.recorder ? { ...body, messages: this.recorder.upstreamMessages(body.messages) } : body, this.options.policy.settings.sampling, this.recorder !== null);
    let result: ForwardResult | HoldEnd;
    let tokens: TokenFields | null = null;
    try {
      const recorder = this.recorder;
      const send = recorder
        ? (hold: boolean) => forwardForTokens(this.upstream, shaped.payload, body.stream === true, res, (r) => this.track(r), hold).then((sent) => ((tokens = sent.tokens), sent.result))
        : (hold: boolean) => forwardChat(this.upstream, shaped.payload, body.stream === true, res, { keepChunks: this.capture !== null, assemble: true, hold, onOpen: (r) => this.track(r) });
      result = await sendHeld(send, true, this.holdOptions(res, this.lastTokens ?? Math.min(FIRST_CALL_TOKENS_MAX, Math.ceil(shaped.payload.length / 4))));
    } catch (err) {
      this.tracker.ended(null);
      throw err;
    }
    if (typeof result === 'string') return this.holdEnded(result, res);
    const call = keptAgentCall(this.kept, { index, started, stream: body.stream === true, result, request, origin });
    this.tracker.ended(isAnswered(call) ? call.response.toolCalls.map((t) => t.id) : null);
    if (isAnswered(call)) this.lastTokens = (call.response.promptTokens ?? 0) + (call.response.completionTokens ?? 0) || this.lastTokens;
    this.calls_.push(call);
    this.recorder?.agentCall({
      index, startedAt: call.startedAt, latencyMs: call.latencyMs, status: call.status, answered: isAnswered(call), finishReason: call.response.finishReason,
      promptTokens: call.response.promptTokens, messages: body.messages, tokens, sampling: shaped.sampling,
    });
    this.stats_ = recordCall(this.stats_, call, Date.now());
    if (call.upstreamError) this.options.logger?.warn({ reason: call.upstreamError }, 'policy gateway cannot reach the policy server');
    if (result.quotaGone && !this.quotaGone) {
      this.quotaGone = true;
      this.options.onQuotaGone?.(call.response.errorMessage ?? 'insufficient_quota');
    }
    this.capture?.write({ call: { ...call, request: undefined }, request: body, response: result.chunks ?? result.response, ...(tokens ? { tokens } : {}) });
    this.options.onCall?.(call, this.stats_);
  }

  private holdOptions(res: http.ServerResponse, estimate: number) {
    return {
      clock: this.waits, pace: this.options.pace, maxWaitMs: (this.options.maxWaitS ?? 600) * 1000, estimate, res, signal: this.closed.signal,
      onHeld: (status: number) => {
        this.stats_ = recordHeld(this.stats_);
        this.options.logger?.debug({ status }, 'policy gateway: the policy server pushed back; holding the call');
      },
    };
  }

  /** A held call that got no answer to pass on: the wait bound (the session is told once), or nobody left to answer. */
  private holdEnded(end: HoldEnd, res: http.ServerResponse): void {
    this.tracker.ended(null);
    if (end === 'max_wait' && !this.waitExceeded) {
      this.waitExceeded = true;
      this.options.onWaitExceeded?.(this.policyWaitS());
    }
    if (!res.headersSent && !res.destroyed) {
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '5' });
      res.end(JSON.stringify({ error: { message: 'policy gateway: the policy server asks to wait longer than policy.max_wait_s', type: 'policy_wait' } }));
    } else res.destroy();
  }

  /** A call that is not the agent's: forwarded as any other, counted, and nothing of it kept. */
  private async forwardForged(index: number, body: ChatRequest, res: http.ServerResponse, origin: CallOrigin): Promise<void> {
    this.stats_ = recordForged(this.stats_);
    this.options.logger?.info({ origin }, 'policy gateway: a chat call that is not the agent\'s own (counted as forged)');
    const started = Date.now();
    const payload = upstreamBody(body, this.options.policy.settings.sampling, false).payload;
    // The model's own calls keep the fleet's pace too, but are never held: their 429 is theirs, on their clock.
    const sent = await sendHeld(
      (hold) => forwardChat(this.upstream, payload, body.stream === true, res, { keepChunks: false, assemble: false, hold, onOpen: (r) => this.track(r) }),
      false,
      { ...this.holdOptions(res, Math.min(FIRST_CALL_TOKENS_MAX, Math.ceil(payload.length / 4))), clock: new WaitClock() },
    );
    if (typeof sent === 'string') return void res.destroy();
    const result = sent;
    this.recorder?.otherCall({ index, origin, status: result.status, latency_ms: Date.now() - started });
    this.capture?.write({ forged: true, origin, status: result.status, request: { ...body, messages: `${body.messages.length} messages` } });
  }

  private track(r: http.ClientRequest): void {
    this.open.add(r);
    r.once('close', () => this.open.delete(r));
  }
}
