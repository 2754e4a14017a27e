/**
 * Two pure decisions of the gateway server (gateway-server.ts): what it keeps of an agent call it
 * forwarded (the call's record, its text within the rollout's budget), and whether a new call must
 * wait for a slot (the agent always keeps one slot the other calls cannot take).
 */
import type { GatewayCall } from './call-stats.ts';
import type { CallOrigin } from './conversation.ts';
import type { ForwardResult } from './forward-call.ts';
import type { KeptText } from './kept-text.ts';
import type { Refusal } from './request-check.ts';

/** Of each answer the transcript keeps at least its end: the judge reads the last 4,000 characters. */
const ANSWER_TAIL_CHARS = 8_000;

export interface ForwardedCall {
  index: number;
  /** When the call was received (ms since the epoch). */
  started: number;
  stream: boolean;
  result: ForwardResult;
  request: GatewayCall['request'];
  origin: CallOrigin;
}

/** The agent call as kept: its text within the rollout's budget (an answer lies at the end of a text, which is kept). */
export function keptAgentCall(kept: KeptText, c: ForwardedCall): GatewayCall {
  const r = c.result.response;
  const response = {
    ...r,
    text: kept.keep(r.text, ANSWER_TAIL_CHARS),
    reasoning: r.reasoning === null ? null : kept.keep(r.reasoning),
    toolCalls: r.toolCalls.map((t) => ({ ...t, arguments: kept.keep(t.arguments) })),
  };
  const { result } = c;
  return {
    index: c.index, startedAt: new Date(c.started).toISOString(), latencyMs: Date.now() - c.started, stream: c.stream,
    connected: result.connected, status: result.status, response, request: c.request, origin: c.origin,
    ...(result.upstreamError !== undefined ? { upstreamError: result.upstreamError, upstreamErrorKind: result.upstreamErrorKind } : {}),
    ...(result.clientAborted ? { clientAborted: true } : {}),
    ...(result.clientStalled ? { clientStalled: true } : {}),
    ...(result.freshRetry ? { freshRetry: true } : {}),
  };
}

/** A 429 when the calls at once are spent (the agent always keeps one slot the others cannot take), else null. */
export function busyRefusal(max: number, inFlight: number, otherInFlight: number, origin: CallOrigin): Refusal | null {
  const othersMax = Math.max(1, max - 1);
  if (inFlight < max && (origin !== 'other' || otherInFlight < othersMax)) return null;
  return { reason: 'busy', status: 429, message: `policy gateway: at most ${max} calls at once` };
}
