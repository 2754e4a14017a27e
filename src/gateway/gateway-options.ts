/** The options and the interface of a policy gateway (index.ts starts one, gateway-server.ts is it). */
import type { Logger } from '../shared/logger.ts';
import type { GatewayCall, GatewayStats } from './call-stats.ts';
import type { StoredImage } from './conversation.ts';
import type { PolicyPace } from '../pacing/index.ts';
import type { TokenCaptureRecord } from './token-recorder.ts';
import type { RolloutPolicy } from '../shared/ports/agent.ts';

export interface PolicyGatewayOptions {
  /**
   * The policy this gateway forwards to: the run's policy section as it is (the model, the output cap,
   * the bounds of bodies and calls, token capture, sampling, the request timeout), and the endpoint
   * and key this worker chose (the key is added as `Authorization: Bearer ...`; null: none).
   */
  policy: RolloutPolicy;
  /** The sandbox must present `Authorization: Bearer <accessToken>` (a per-rollout dummy key). */
  accessToken: string;
  /** Listen on this Unix socket (created; removed on close): connections of unknown origin, or (with `agentSocketPath`) the others. */
  socketPath?: string;
  /** Listen on this Unix socket for the connections the provider vouches the agent process made. */
  agentSocketPath?: string;
  /** Also (or instead) listen on TCP; port 0 picks a free port. */
  tcp?: { host: string; port: number };
  /** Give up on one upstream call after this long (ms); default `policy.request_timeout_s` + 5 s, so OpenCode reports its own timeout first. */
  requestTimeoutMs?: number;
  /** Give up connecting to the policy server after this long (ms); default 15 s. */
  connectTimeoutMs?: number;
  /** Bytes of images kept for the transcript (each image once): `transcripts.max_image_mib` of the run. */
  imageBudgetBytes: number;
  /** Append each call's request and response to this JSONL file (images stored once in `imageDir`). */
  capture?: { path: string; imageDir?: string } | null;
  logger?: Logger;
  /** Called after each forwarded call is complete (for live health checks). */
  onCall?: (call: GatewayCall, stats: GatewayStats) => void;
  /** Called once when the call budget (`policy.max_calls_per_rollout`) is spent. */
  onBudgetExhausted?: () => void;
  /** The fleet's pace (shared rate limit, adaptive concurrency); none: calls go out at once. */
  pace?: PolicyPace;
  /** Bound of the time the agent's calls are held on back-pressure per rollout, in seconds (`policy.max_wait_s`); default 600. */
  maxWaitS?: number;
  /** Called once when a held call would wait past `maxWaitS`. */
  onWaitExceeded?: (waitedS: number) => void;
  /** Called once when the policy server says the key's quota is gone (`insufficient_quota`), with its message. */
  onQuotaGone?: (message: string) => void;
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
  /** With token capture on: the calls' token ids, the chain and the other calls; else null. */
  readonly tokenCapture: TokenCaptureRecord | null;
  stats(): GatewayStats;
  /** Seconds the agent's calls waited on the policy server's back-pressure and the fleet's pace so far (a wait going on included). */
  policyWaitS(): number;
  /** Stop listening, cut open calls, flush the capture file and remove the socket. Safe to call twice. */
  close(): Promise<void>;
}
