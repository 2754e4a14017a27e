/**
 * Who may use the dashboard. Bound to loopback (127.0.0.1, ::1, localhost) it is open to reads;
 * bound to any other address it refuses to start without credentials, and then every request needs
 * them. When credentials are set, a state-changing request (anything but GET/HEAD: retry, remove,
 * promote, clean, pause...) always needs them; `read_only` refuses every such request with 403.
 *
 * Credentials: basic auth (`dashboard.user` + `dashboard.password`, from VCFLEET_DASHBOARD_USER and
 * VCFLEET_DASHBOARD_PASSWORD) or a bearer token (`dashboard.token`, from VCFLEET_DASHBOARD_TOKEN).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
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
}

export interface AccessRequest {
  method: string;
  authorization?: string;
  origin?: string;
  host?: string;
}

export type AccessDecision = 'allow' | 'unauthorized' | 'read_only' | 'bad_origin' | 'bad_host';

const LOOPBACK_NAMES = new Set(['127.0.0.1', '::1', '[::1]', 'localhost']);

/** Only these count as loopback; 127.0.0.2 and 0.0.0.0 do not (they need credentials). */
export function isLoopback(host: string): boolean {
  return LOOPBACK_NAMES.has(host.trim().toLowerCase());
}

export function hasCredentials(c: DashboardCredentials): boolean {
  return Boolean((c.user && c.password) || c.token);
}

/** Throws ConfigError when the bind address or the credentials do not allow starting. */
export function checkBind(host: string, c: DashboardCredentials): void {
  if (Boolean(c.user) !== Boolean(c.password)) {
    throw new ConfigError('dashboard basic auth needs both VCFLEET_DASHBOARD_USER and VCFLEET_DASHBOARD_PASSWORD (dashboard.user, dashboard.password)');
  }
  if (!isLoopback(host) && !hasCredentials(c)) {
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

function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** True when the Authorization header carries the configured basic credentials or bearer token. */
export function authorized(header: string | undefined, c: DashboardCredentials): boolean {
  if (!header) return false;
  const [scheme, value = ''] = header.trim().split(/\s+/, 2);
  if (/^bearer$/i.test(scheme) && c.token) return sameSecret(value, c.token);
  if (/^basic$/i.test(scheme) && c.user && c.password) {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    return sameSecret(decoded, `${c.user}:${c.password}`);
  }
  return false;
}

/** The host name of a Host header or an Origin URL, without port or brackets kept apart. */
function hostName(value: string): string {
  try {
    return new URL(value.includes('://') ? value : `http://${value}`).hostname;
  } catch {
    return '';
  }
}

/** Decide one request; pure, so it is tested without a server. */
export function decide(req: AccessRequest, policy: AccessPolicy): AccessDecision {
  const write = req.method !== 'GET' && req.method !== 'HEAD';
  if (policy.loopbackHostsOnly && req.host && !isLoopback(hostName(req.host))) return 'bad_host';
  const needAuth = hasCredentials(policy.credentials) && (policy.authForReads || write);
  if (needAuth && !authorized(req.authorization, policy.credentials)) return 'unauthorized';
  if (write && policy.readOnly) return 'read_only';
  // Browsers send Origin on cross-site writes: a page elsewhere must not drive this dashboard.
  if (write && req.origin && req.host && new URL(req.origin).host !== req.host) return 'bad_origin';
  return 'allow';
}

/** The Hono middleware applying `decide` to every request. */
export function accessGuard(policy: AccessPolicy): MiddlewareHandler {
  const challenge = policy.credentials.user ? 'Basic realm="vcfleet dashboard", charset="UTF-8"' : 'Bearer realm="vcfleet dashboard"';
  return async (c, next) => {
    let decision: AccessDecision;
    try {
      decision = decide(
        { method: c.req.method, authorization: c.req.header('authorization'), origin: c.req.header('origin'), host: c.req.header('host') },
        policy,
      );
    } catch {
      decision = 'bad_origin';
    }
    if (decision === 'allow') return next();
    if (decision === 'unauthorized') return c.text('credentials required\n', 401, { 'WWW-Authenticate': challenge });
    if (decision === 'read_only') return c.json({ error: 'the dashboard is read-only (--read-only): no changes allowed' }, 403);
    if (decision === 'bad_host') return c.text('unknown Host header for a loopback dashboard\n', 403);
    return c.text('cross-origin request refused\n', 403);
  };
}
