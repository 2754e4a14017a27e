/**
 * Whether a failed `fetch` never reached the server at all: the name did not resolve, the connection
 * was refused or could not be made, or TLS failed. Those do not heal in the seconds between download
 * attempts (the machine is offline, firewalled or behind an intercepting proxy), so `prepare` stops at
 * once and says how to work offline; a server error or a connection cut mid-body is retried instead.
 */

const DNS = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'EAI_NODATA']);
const UNREACHABLE = new Set(['ENETUNREACH', 'EHOSTUNREACH', 'ENETDOWN', 'EHOSTDOWN', 'EADDRNOTAVAIL', 'ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT']);
/** OpenSSL and Node TLS codes: a wrong protocol, a certificate that does not verify. */
const TLS = /^(ERR_SSL_|ERR_TLS_|UNABLE_TO_)|CERT|SIGNATURE/;

/** The error codes along an error's `cause` chain (and inside an AggregateError, as a dual-stack connect throws). */
function codes(err: unknown, depth = 0): string[] {
  if (!err || typeof err !== 'object' || depth > 5) return [];
  const { code, cause, errors } = err as { code?: unknown; cause?: unknown; errors?: unknown };
  const own = typeof code === 'string' ? [code] : [];
  const inner = Array.isArray(errors) ? errors.flatMap((e) => codes(e, depth + 1)) : [];
  return [...own, ...inner, ...codes(cause, depth + 1)];
}

/** What kept a request from reaching its server (`DNS lookup failed (ENOTFOUND)`), or null when it did reach it. */
export function networkFailure(err: unknown): string | null {
  for (const code of codes(err)) {
    if (DNS.has(code)) return `DNS lookup failed (${code})`;
    if (code === 'ECONNREFUSED') return `connection refused (${code})`;
    if (UNREACHABLE.has(code)) return `host unreachable (${code})`;
    if (TLS.test(code)) return `TLS failed (${code})`;
  }
  return null;
}
