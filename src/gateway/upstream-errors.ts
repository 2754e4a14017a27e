/** Names for the ways the gateway can fail to reach the policy server. */

export type UpstreamErrorKind = 'connection_refused' | 'dns' | 'tls' | 'timeout' | 'reset' | 'unreachable' | 'other';

const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|EPROTO$)/;

/** Classify a socket/HTTP client error; the reason string is safe to log (no secrets). */
export function classifyUpstreamError(err: unknown): { kind: UpstreamErrorKind; reason: string } {
  const e = err as NodeJS.ErrnoException | undefined;
  const code = e?.code ?? '';
  const message = e?.message ?? String(err);
  const kind: UpstreamErrorKind =
    code === 'ECONNREFUSED' ? 'connection_refused'
    : code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_FAIL' ? 'dns'
    : TLS_CODES.test(code) ? 'tls'
    : code === 'ETIMEDOUT' || code === 'UPSTREAM_TIMEOUT' || code === 'CONNECT_TIMEOUT' ? 'timeout'
    : code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' ? 'reset'
    : code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ENETDOWN' ? 'unreachable'
    : 'other';
  return { kind, reason: code ? `${kind} (${code}): ${message}` : `${kind}: ${message}` };
}

/**
 * A pooled connection the server closed while idle (keep-alive ran out as it was reused) fails
 * before any answer: not the server failing. Such a call is sent again once, on a fresh connection
 * (forward-call.ts, token-forward.ts).
 */
export function isStalePooledReset(kind: UpstreamErrorKind, req: { reusedSocket: boolean }, status: number | null): boolean {
  return kind === 'reset' && req.reusedSocket && status === null;
}

/** An Error with a code, for the gateway's own timeouts. */
export function codedError(code: string, message: string): NodeJS.ErrnoException {
  const err = new Error(message) as NodeJS.ErrnoException;
  err.code = code;
  return err;
}
