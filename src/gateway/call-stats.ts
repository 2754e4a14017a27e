/**
 * What the gateway saw of the policy server, call by call, and the running totals the runner reads.
 * Only the agent's own calls are recorded and counted here (conversation.ts tells them apart); the
 * others are counted as forged, nothing more. `recordCall` is pure: the same calls give the same stats.
 */
import type { CallOrigin, RequestView } from './conversation.ts';
import type { ForwardResult } from './forward-call.ts';

/** One forwarded call as the gateway saw it: what came back (forward-call.ts) and what was sent. */
export interface GatewayCall extends Omit<ForwardResult, 'chunks'> {
  /** Position among the calls forwarded to the policy server, from 0. */
  index: number;
  startedAt: string;
  latencyMs: number;
  stream: boolean;
  /** What was new in the request: tool results and images the model was shown. */
  request: RequestView;
  /** Who made the call's connection, as the provider told it. */
  origin: CallOrigin;
}

export interface GatewayStats {
  /** Calls forwarded to the policy server. */
  calls: number;
  /** Calls answered with a 2xx status. */
  answered: number;
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
  /** Tool calls in the answered responses. */
  toolCalls: number;
  /** Requests of the sandbox the gateway answered itself with a 4xx, by reason. */
  refused: Record<string, number>;
  /** Chat calls forwarded that were not the agent's own (sent by something the model ran). */
  forgedCalls: number;
  /** Back-pressure answers (429, 503 with Retry-After) to the agent's calls that the gateway held and sent again (never failures). */
  heldAnswers: number;
  /** Calls sent again on a fresh connection after a pooled one the server had closed failed. */
  freshRetries: number;
}

export function emptyStats(): GatewayStats {
  return {
    calls: 0, answered: 0, upstreamErrors: 0, upstreamErrorReasons: {}, retryableStatuses: 0, consecutiveFailures: 0,
    failingSince: null, lastSuccessAt: null, promptTokens: 0, completionTokens: 0, toolCalls: 0, refused: {}, forgedCalls: 0,
    heldAnswers: 0, freshRetries: 0,
  };
}

export function isAnswered(call: Pick<GatewayCall, 'status' | 'upstreamError' | 'clientStalled'>): boolean {
  return call.status !== null && call.status >= 200 && call.status < 300 && call.upstreamError === undefined && call.clientStalled !== true;
}

/** A failure that says the policy server is down or overloaded (OpenCode retries these). */
export function isServerFailure(call: Pick<GatewayCall, 'status' | 'upstreamError' | 'clientAborted'>): boolean {
  if (call.upstreamError !== undefined) return true;
  return call.status !== null && (call.status >= 500 || call.status === 429);
}

/** The stats after one more finished call. */
export function recordCall(stats: GatewayStats, call: GatewayCall, now: number): GatewayStats {
  const next: GatewayStats = { ...stats, upstreamErrorReasons: { ...stats.upstreamErrorReasons }, refused: { ...stats.refused } };
  next.calls++;
  if (call.freshRetry) next.freshRetries++;
  if (call.upstreamError !== undefined && call.upstreamErrorKind !== undefined) {
    next.upstreamErrors++;
    next.upstreamErrorReasons[call.upstreamErrorKind] = (next.upstreamErrorReasons[call.upstreamErrorKind] ?? 0) + 1;
  } else if (isServerFailure(call)) next.retryableStatuses++;
  if (isAnswered(call)) {
    next.answered++;
    next.consecutiveFailures = 0;
    next.failingSince = null;
    next.lastSuccessAt = now;
    next.toolCalls += call.response.toolCalls.length;
  } else if (isServerFailure(call)) {
    next.consecutiveFailures++;
    next.failingSince ??= now;
  }
  next.promptTokens += call.response.promptTokens ?? 0;
  next.completionTokens += call.response.completionTokens ?? 0;
  return next;
}

/** The stats after a forged call (not the agent's) was forwarded: counted, nothing else. */
export function recordForged(stats: GatewayStats): GatewayStats {
  return { ...stats, forgedCalls: stats.forgedCalls + 1 };
}

/** The stats after a back-pressure answer was held (not a failure: the call is sent again). */
export function recordHeld(stats: GatewayStats): GatewayStats {
  return { ...stats, heldAnswers: stats.heldAnswers + 1 };
}

/** The stats after the gateway refused a request itself. */
export function recordRefusal(stats: GatewayStats, reason: string): GatewayStats {
  return { ...stats, refused: { ...stats.refused, [reason]: (stats.refused[reason] ?? 0) + 1 } };
}
