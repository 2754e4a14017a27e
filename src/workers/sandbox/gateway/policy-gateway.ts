/**
 * The per-rollout policy gateway: the only door out of a sandbox. OpenCode (and anything else the
 * model runs) reaches it over a Unix socket bridged into the sandbox, or over TCP. It is a strict
 * allowlist proxy: `POST /v1/chat/completions` with a body that parses as a chat call is forwarded
 * to the worker's policy endpoint with the real key (which never enters the sandbox), the model set
 * to the policy model and the output capped; `GET /v1/models` is answered here; everything else is
 * refused with a 4xx and counted. Bodies, concurrent calls and calls per rollout are bounded, and no
 * input, however malformed, can throw past the connection it came on.
 *
 * Each forwarded call of the agent's own conversation is recorded as the gateway saw it (status,
 * connection, the assembled answer, what the request added to the conversation): the rollout's
 * outcome and transcript come from here. Calls something else in the sandbox made are forwarded and
 * counted as forged, never recorded (conversation.ts). What is kept per rollout is bounded (kept-text.ts).
 */
import type { Logger } from '../../../shared/logger.ts';
import type { GatewayCall, GatewayStats } from './call-stats.ts';
import type { StoredImage } from './conversation.ts';
import { GatewayServer } from './gateway-server.ts';

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
  /** Listen on this Unix socket (created; removed on close): connections of unknown origin, or (with `agentSocketPath`) the others. */
  socketPath?: string;
  /** Listen on this Unix socket for the connections the provider vouches the agent process made. */
  agentSocketPath?: string;
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
  /** What was cut to keep the rollout's kept text and images within their bounds (notes for the transcript). */
  readonly cut: string[];
  stats(): GatewayStats;
  /** Stop listening, cut open calls, flush the capture file and remove the socket. Safe to call twice. */
  close(): Promise<void>;
}

export async function startPolicyGateway(options: PolicyGatewayOptions): Promise<PolicyGateway> {
  if (!options.socketPath && !options.tcp) throw new Error('policy gateway needs a socketPath or a tcp listener');
  const gateway = new GatewayServer(options);
  try {
    await gateway.start();
  } catch (err) {
    await gateway.close();
    throw err;
  }
  return gateway;
}
