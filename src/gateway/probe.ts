/**
 * The gateway's own probe of the policy server: one tiny chat call of the worker's, with nothing of
 * the sandbox in it. Once the model has acted, the sandbox could have caused any failure of the
 * calls of its own conversation (a request the server chokes on, a connection it starves); a failing
 * probe is evidence it cannot produce, and only then is a rollout masked for the policy server.
 */
import http from 'node:http';
import https from 'node:https';
import { stripCredentials } from '../shared/config/run-settings.ts';
import { classifyUpstreamError } from './upstream-errors.ts';

export type ProbeResult = { ok: true } | { ok: false; reason: string };

/** Default time the probe may take, in milliseconds. */
export const PROBE_TIMEOUT_MS = 30_000;

/** POST one 1-token chat call to `baseUrl` (`.../v1`) with the worker's key; ok on a 2xx answer. Never throws. */
export function probePolicyServer(baseUrl: string, apiKey: string | null, model: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<ProbeResult> {
  return new Promise((resolve) => {
    let url: URL;
    try {
      url = new URL(`${baseUrl.replace(/\/+$/, '')}/chat/completions`);
    } catch {
      return resolve({ ok: false, reason: `the policy endpoint ${stripCredentials(baseUrl)} is not a URL` });
    }
    const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'Reply with OK.' }], max_tokens: 1, stream: false });
    const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'user-agent': 'vcfleet-policy-probe' };
    if (apiKey) headers.authorization = `Bearer ${apiKey}`;
    const client = url.protocol === 'https:' ? https : http;
    const req = client.request(url, { method: 'POST', headers, timeout: timeoutMs }, (res) => {
      const status = res.statusCode ?? 0;
      res.resume();
      res.on('end', () => resolve(status >= 200 && status < 300 ? { ok: true } : { ok: false, reason: `the probe was answered HTTP ${status}` }));
      res.on('error', (err) => resolve({ ok: false, reason: `the probe's answer broke off: ${classifyUpstreamError(err).reason}` }));
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'UPSTREAM_TIMEOUT' })));
    req.on('error', (err) => resolve({ ok: false, reason: `the probe failed: ${classifyUpstreamError(err).reason}` }));
    req.end(body);
  });
}
