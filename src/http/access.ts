/**
 * Who may use the dashboard, the viewer and `vcfleet serve` (each binds one HTTP server). Bound to loopback (127.0.0.1, ::1, localhost) it is open to reads;
 * bound to any other address it refuses to start without credentials, and then every request needs
 * them. When credentials are set, a state-changing request (anything but GET/HEAD: retry, remove,
 * promote, clean, pause...) always needs them; `read_only` refuses every such request with 403.
 *
 * An address allowlist (`serve.allow_from`, serve only) stands in for credentials for the clients it
 * lists: a request whose TCP peer address is in it needs none (a Forwarded or X-Forwarded-For header
 * is never read: it is the client's word); every other request needs them as above. With a list, a
 * serve may bind beyond loopback without credentials: then only the listed addresses get in.
 *
 * Credentials: basic auth (`dashboard.user` + `dashboard.password`, from VCFLEET_DASHBOARD_USER and
 * VCFLEET_DASHBOARD_PASSWORD) or a bearer token (`dashboard.token`, from VCFLEET_DASHBOARD_TOKEN),
 * checked by hono's basic-auth and bearer-auth middleware (constant-time comparisons); cross-origin
 * writes are refused by hono's csrf middleware.
 */
import { BlockList, isIP } from 'node:net';
import type { Context, MiddlewareHandler } from 'hono';
import { basicAuth } from 'hono/basic-auth';
import { bearerAuth } from 'hono/bearer-auth';
import { every, some } from 'hono/combine';
import { csrf } from 'hono/csrf';
import { HTTPException } from 'hono/http-exception';
import { ConfigError } from '../shared/errors.ts';

export interface DashboardCredentials {
  user: string | null;
  password: string | null;
  token: string | null;
}

export interface AccessPolicy {
  credentials: DashboardCredentials;
  /** Every request needs credentials (the dashboard listens beyond loopback). */
  authForReads: boolean;
  readOnly: boolean;
  /** Loopback bind: reject Host headers that are not loopback names (DNS rebinding). */
  loopbackHostsOnly: boolean;
  /** Peers that need no credentials (`serve.allow_from`); absent: none. */
  allowFrom?: AddressAllowlist;
  /** Refusals as `{"error": "…"}` JSON, as the rest of an API answers (`vcfleet serve`); default plain text (the dashboard). */
  jsonErrors?: boolean;
}

/** Addresses and CIDR blocks (IPv4 or IPv6) that may call without credentials. */
export interface AddressAllowlist {
  readonly size: number;
  /** The peer address is listed (an IPv4-mapped IPv6 address counts as its IPv4 one). */
  allows(address: string | undefined): boolean;
}

/** The allowlist of `entries` (`10.0.0.5`, `10.0.0.0/8`, `fd00::/8`); throws ConfigError naming an entry that is neither. */
export function addressAllowlist(entries: readonly string[], key = 'serve.allow_from'): AddressAllowlist {
  const list = new BlockList();
  for (const entry of entries) {
    const [address, bits, more] = entry.trim().split('/');
    const family = isIP(address);
    const prefix = bits === undefined ? null : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
    if (family === 0 || more !== undefined || Number.isNaN(prefix) || (prefix !== null && prefix > (family === 4 ? 32 : 128))) {
      throw new ConfigError(`${key}: "${entry}" is not an IP address or a CIDR block (e.g. 10.0.0.5, 10.0.0.0/8, fd00::/8)`);
    }
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (prefix === null) list.addAddress(address, type);
    else list.addSubnet(address, prefix, type);
  }
  return {
    size: entries.length,
    allows(peer) {
      if (!peer || entries.length === 0) return false;
      const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(peer);
      const address = mapped ? mapped[1] : peer;
      const family = isIP(address);
      return family !== 0 && list.check(address, family === 4 ? 'ipv4' : 'ipv6');
    },
  };
}

/** The TCP peer address of a request served by @hono/node-server (undefined elsewhere, e.g. `app.request`). */
function peerAddress(c: Context): string | undefined {
  const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined;
  return env?.incoming?.socket?.remoteAddress;
}

const LOOPBACK_NAMES = new Set(['127.0.0.1', '::1', '[::1]', 'localhost']);
/** What an `Authorization: Bearer` value may hold (RFC 6750 b64token), as hono's bearer-auth reads it. */
const BEARER_TOKEN = /^[A-Za-z0-9._~+/-]+=*$/;
const REALM = 'vcfleet dashboard';

/** Only these count as loopback; 127.0.0.2 and 0.0.0.0 do not (they need credentials). */
export function isLoopback(host: string): boolean {
  return LOOPBACK_NAMES.has(host.trim().toLowerCase());
}

export function hasCredentials(c: DashboardCredentials): boolean {
  return Boolean((c.user && c.password) || c.token);
}

/** Throws ConfigError when the bind address or the credentials do not allow starting. */
export function checkBind(host: string, c: DashboardCredentials, allowFrom?: AddressAllowlist): void {
  if (Boolean(c.user) !== Boolean(c.password)) {
    throw new ConfigError('dashboard basic auth needs both VCFLEET_DASHBOARD_USER and VCFLEET_DASHBOARD_PASSWORD (dashboard.user, dashboard.password)');
  }
  // Basic auth splits "user:password" at the first colon (RFC 7617): such a user could never log in.
  if (c.user?.includes(':')) throw new ConfigError('VCFLEET_DASHBOARD_USER (dashboard.user) may not contain ":" (basic auth splits at it)');
  if (c.token && !BEARER_TOKEN.test(c.token)) {
    throw new ConfigError('VCFLEET_DASHBOARD_TOKEN (dashboard.token) may hold only letters, digits and - . _ ~ + / (then = padding): a bearer token of any other form is never accepted');
  }
  if (!isLoopback(host) && !hasCredentials(c) && !(allowFrom && allowFrom.size > 0)) {
    throw new ConfigError(
      `refusing to serve the dashboard on ${host} without credentials: set VCFLEET_DASHBOARD_USER and ` +
        'VCFLEET_DASHBOARD_PASSWORD (basic auth) or VCFLEET_DASHBOARD_TOKEN (bearer token), or bind 127.0.0.1',
    );
  }
}

export function accessPolicy(host: string, credentials: DashboardCredentials, readOnly: boolean): AccessPolicy {
  const loopback = isLoopback(host);
  return { credentials, authForReads: !loopback, readOnly, loopbackHostsOnly: loopback };
}

/** The host name of a Host header or an Origin URL (no port); '' when it is not one. */
function hostName(value: string): string {
  try {
    return new URL(value.includes('://') ? value : `http://${value}`).hostname;
  } catch {
    return '';
  }
}

/** Either credential the policy holds; null when it holds none. Basic is tried last, so its challenge is the one a browser sees. */
function credentialCheck(c: DashboardCredentials): MiddlewareHandler | null {
  const checks: MiddlewareHandler[] = [];
  if (c.token) checks.push(bearerAuth({ token: c.token, realm: REALM, noAuthenticationHeader: { message: 'credentials required\n' } }));
  if (c.user && c.password) {
    checks.push(basicAuth({ username: c.user, password: c.password, realm: REALM, invalidUserMessage: 'credentials required\n' }));
  }
  return checks.length ? some(...checks) : null;
}

/**
 * Cross-origin writes, as hono's csrf middleware judges them: a write with a body a web form can
 * send (form data, text, none) must carry this host's Origin or `Sec-Fetch-Site: same-origin`, else
 * 403. A page elsewhere can send any other write (a JSON body) only after a CORS preflight, which
 * this dashboard never grants. A write with neither Origin nor Sec-Fetch-Site comes from a script,
 * not a browser: it passes, and the credentials decide.
 */
function sameOriginWrites(): MiddlewareHandler {
  // Host against host, not scheme: behind a proxy that terminates HTTPS the Origin says https.
  const check = csrf({ origin: (origin, c) => (URL.canParse(origin) ? new URL(origin).host === c.req.header('host') : false) });
  return async (c, next) => {
    if (c.req.header('origin') === undefined && c.req.header('sec-fetch-site') === undefined) return next();
    return check(c, next);
  };
}

const refuseWrites: MiddlewareHandler = async (c) => c.json({ error: 'the dashboard is read-only (--read-only): no changes allowed' }, 403);

function isWrite(c: Context): boolean {
  return c.req.method !== 'GET' && c.req.method !== 'HEAD';
}

/** The Hono middleware applying the policy to every request; refusals answer 401 or 403 and go no further. */
export function accessGuard(policy: AccessPolicy): MiddlewareHandler {
  const credentials = credentialCheck(policy.credentials);
  const origins = sameOriginWrites();
  return async (c, next) => {
    const host = c.req.header('host');
    if (policy.loopbackHostsOnly && host !== undefined && !isLoopback(hostName(host))) {
      return c.text('unknown Host header for a loopback dashboard\n', 403);
    }
    const write = isWrite(c);
    const steps: MiddlewareHandler[] = [];
    const listed = policy.allowFrom?.allows(peerAddress(c)) ?? false;
    if (!listed) {
      if (credentials && (policy.authForReads || write)) steps.push(credentials);
      // Bound beyond loopback with an allowlist and no credentials: only the listed get in.
      else if (!credentials && policy.allowFrom && policy.authForReads) return c.text('this address may not call: it is not in serve.allow_from\n', 403);
    }
    if (write && policy.readOnly) steps.push(refuseWrites);
    if (write) steps.push(origins);
    try {
      return await every(...steps)(c, next);
    } catch (err) {
      // hono's auth and csrf middleware refuse by throwing their response; csrf's is the only 403.
      if (!(err instanceof HTTPException)) throw err;
      if (err.status === 403) return policy.jsonErrors ? c.json({ error: 'cross-origin request refused' }, 403) : c.text('cross-origin request refused\n', 403);
      if (!policy.jsonErrors) return err.getResponse();
      // The challenge header stays; the body says what is missing, as JSON like every other error of the API.
      const challenge = err.getResponse().headers.get('www-authenticate');
      if (challenge) c.header('WWW-Authenticate', challenge);
      return c.json({ error: 'unauthorized: send the credentials this server was started with (Authorization: Bearer <token>, or basic auth)' }, 401);
    }
  };
}
