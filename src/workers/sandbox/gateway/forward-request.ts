/** What the gateway changes in a call before forwarding it to the policy server. */
import type http from 'node:http';

/** Headers never forwarded: hop-by-hop ones, the sandbox's dummy key, and compression (the gateway reads the stream). */
const HOP_HEADERS = new Set([
  'host', 'authorization', 'content-length', 'connection', 'keep-alive', 'transfer-encoding',
  'accept-encoding', 'proxy-authorization', 'te', 'upgrade', 'trailer',
]);

/** Clamp the output cap and ask for usage in streams; returns the body to forward. */
export function adjustBody(body: Record<string, unknown>, pathname: string, maxOutputTokens?: number): Record<string, unknown> {
  if (!/\/(chat\/)?completions$/.test(pathname)) return body;
  const out = { ...body };
  if (maxOutputTokens) {
    for (const key of ['max_tokens', 'max_completion_tokens']) {
      if (typeof out[key] === 'number' && (out[key] as number) > maxOutputTokens) out[key] = maxOutputTokens;
    }
    if (out.max_tokens === undefined && out.max_completion_tokens === undefined) out.max_tokens = maxOutputTokens;
  }
  if (out.stream === true) {
    const so = (out.stream_options ?? {}) as Record<string, unknown>;
    if (so.include_usage === undefined) out.stream_options = { ...so, include_usage: true };
  }
  return out;
}

/**
 * The body (parsed JSON, adjusted; null when not JSON), the bytes to send, and the headers: the
 * sandbox's headers minus hop-by-hop ones and its dummy key, plus the real key when there is one.
 */
export function prepareForward(
  req: http.IncomingMessage,
  raw: Buffer,
  pathname: string,
  apiKey: string | null,
  maxOutputTokens?: number,
): { body: Record<string, unknown> | null; payload: Buffer; headers: http.OutgoingHttpHeaders } {
  let body: Record<string, unknown> | null = null;
  let payload = raw;
  if (raw.length > 0 && /json/.test(req.headers['content-type'] ?? 'application/json')) {
    try {
      body = adjustBody(JSON.parse(raw.toString('utf8')) as Record<string, unknown>, pathname, maxOutputTokens);
      payload = Buffer.from(JSON.stringify(body));
    } catch {
      body = null; // not JSON: forwarded unchanged
    }
  }
  const headers: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(req.headers)) if (!HOP_HEADERS.has(k) && v !== undefined) headers[k] = v;
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  if (payload.length > 0) headers['content-length'] = payload.length;
  return { body, payload, headers };
}
