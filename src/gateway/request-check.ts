/**
 * The gateway's allowlist, as pure checks on what the sandbox sent: the access token (compared in
 * constant time), the method and the path. Only `POST /v1/chat/completions` is forwarded;
 * `GET /v1/models` is answered by the gateway itself. Anything else is refused with a 4xx and a
 * reason that is counted in the rollout's row.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export const CHAT_PATH = '/v1/chat/completions';
export const MODELS_PATH = '/v1/models';

/** Why the gateway answered a request itself (the keys of a row's `refused_requests`). */
export type RefusalReason = 'malformed_http' | 'token' | 'method' | 'path' | 'body' | 'too_large' | 'busy' | 'budget';

export interface Refusal {
  reason: RefusalReason;
  status: number;
  message: string;
}

export type RequestKind = { kind: 'chat' } | { kind: 'models' };

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Whether `Authorization` carries `Bearer <token>`; the comparison takes the same time either way. */
export function tokenMatches(authorization: string | string[] | undefined, token: string): boolean {
  const presented = typeof authorization === 'string' ? authorization : '';
  return timingSafeEqual(digest(presented), digest(`Bearer ${token}`));
}

/** The request target without parsing it as a URL (any text the sandbox sends must be harmless). */
function pathOf(target: string | undefined): string | null {
  if (!target || target.length > 2048 || !target.startsWith('/')) return null;
  return target;
}

/** Decide what a request is, or why it is refused. Never throws. */
export function checkRequest(method: string | undefined, target: string | undefined, authorization: string | string[] | undefined, token: string): RequestKind | Refusal {
  const p = pathOf(target);
  if (p === null) return { reason: 'malformed_http', status: 400, message: 'policy gateway: the request target is not a path' };
  if (!tokenMatches(authorization, token)) {
    return { reason: 'token', status: 401, message: 'policy gateway: wrong or missing access token' };
  }
  if (p === CHAT_PATH) {
    if (method === 'POST') return { kind: 'chat' };
    return { reason: 'method', status: 405, message: `policy gateway: ${CHAT_PATH} takes POST only` };
  }
  if (p === MODELS_PATH) {
    if (method === 'GET') return { kind: 'models' };
    return { reason: 'method', status: 405, message: `policy gateway: ${MODELS_PATH} takes GET only` };
  }
  return { reason: 'path', status: 404, message: `policy gateway: only POST ${CHAT_PATH} and GET ${MODELS_PATH} are served` };
}

export function isRefusal(x: RequestKind | Refusal): x is Refusal {
  return 'reason' in x;
}
