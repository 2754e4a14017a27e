/**
 * Which Redis the fleet talks to: one server (`redis://`, `rediss://`), a primary found through Redis
 * Sentinel (`redis.sentinels` + `redis.sentinel_name`, or `redis+sentinel://`), or a Redis Cluster
 * (`redis.cluster: true` + `redis.cluster_nodes`, or `redis+cluster://`). One resolved description,
 * made from the config, that every connection of every role is built from (connect.ts).
 *
 *   redis+sentinel://[:password@]h1:26379,h2:26379/<master_name>?sentinel_password=…&db=N
 *   redis+cluster://[:password@]h1:6379,h2:6379
 */
import { ConfigError } from '../errors.ts';

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

export interface HostPort {
  host: string;
  port: number;
}

interface Common {
  username?: string;
  password?: string;
  /** For messages: the address with every password masked. */
  display: string;
}

export type RedisEndpoint =
  | (Common & { kind: 'single'; url: string })
  | (Common & { kind: 'sentinel'; sentinels: HostPort[]; name: string; sentinelPassword?: string; db: number; tls: boolean })
  | (Common & { kind: 'cluster'; nodes: HostPort[]; tls: boolean });

/** The part of the config this module reads. */
export interface RedisConfigPart {
  redis_url: string | null;
  redis: { sentinels: string[]; sentinel_name: string | null; sentinel_password: string | null; cluster: boolean; cluster_nodes: string[] };
}

export function parseHostPort(text: string, what: string): HostPort {
  const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/.exec(text.trim());
  const port = m ? Number(m[2]) : NaN;
  if (!m || port < 1 || port > 65535) throw new ConfigError(`${what}: "${text}" is not host:port (e.g. 10.0.0.5:26379)`);
  return { host: m[1].replace(/^\[|\]$/g, ''), port };
}

const hp = (a: HostPort) => (a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`);

/** `scheme://[user[:password]@]hosts[/path][?query]`, split without WHATWG URL (which takes one host only). */
function splitMultiHost(url: string): { scheme: string; username?: string; password?: string; hosts: string; path: string; query: URLSearchParams } {
  const m = /^([a-z+]+):\/\/(?:([^@/]*)@)?([^/?]*)(\/[^?]*)?(?:\?(.*))?$/i.exec(url);
  if (!m) throw new ConfigError(`redis_url "${redactUrl(url)}" is not a URL of the form ${url.split(':')[0]}://host:port,host:port/…`);
  const [user, pass] = m[2] === undefined ? [] : m[2].includes(':') ? [m[2].slice(0, m[2].indexOf(':')), m[2].slice(m[2].indexOf(':') + 1)] : [m[2]];
  return {
    scheme: m[1].toLowerCase(),
    username: user ? decodeURIComponent(user) : undefined,
    password: pass ? decodeURIComponent(pass) : undefined,
    hosts: m[3],
    path: m[4] ?? '',
    query: new URLSearchParams(m[5] ?? ''),
  };
}

function nodesOf(list: string, what: string): HostPort[] {
  return list.split(',').filter((s) => s.trim() !== '').map((s) => parseHostPort(s, what));
}

/** The endpoint of a config: the URL forms, or the `redis.*` settings; a sentinel password from either. */
export function resolveRedisEndpoint(config: RedisConfigPart): RedisEndpoint {
  const url = config.redis_url ?? DEFAULT_REDIS_URL;
  const r = config.redis;
  const scheme = url.split(':')[0].toLowerCase();
  if (scheme === 'redis+sentinel' || scheme === 'rediss+sentinel') {
    const u = splitMultiHost(url);
    const name = decodeURIComponent(u.path.replace(/^\//, '').split('/')[0] ?? '') || r.sentinel_name;
    if (!name) throw new ConfigError(`redis_url ${redactUrl(url)} names no master group: add it as the path (redis+sentinel://h1:26379,h2:26379/mymaster) or set redis.sentinel_name`);
    const sentinels = nodesOf(u.hosts, 'redis_url (a sentinel)');
    if (sentinels.length === 0) throw new ConfigError(`redis_url ${redactUrl(url)} lists no sentinel: redis+sentinel://h1:26379,h2:26379/${name}`);
    const db = Number(u.query.get('db') ?? 0);
    if (!Number.isInteger(db) || db < 0) throw new ConfigError(`redis_url ${redactUrl(url)}: db=${u.query.get('db')} is not a database number`);
    const sentinelPassword = u.query.get('sentinel_password') ?? r.sentinel_password ?? undefined;
    return { kind: 'sentinel', sentinels, name, db, tls: scheme.startsWith('rediss'), username: u.username, password: u.password, sentinelPassword, display: redactUrl(url) };
  }
  if (scheme === 'redis+cluster' || scheme === 'rediss+cluster') {
    const u = splitMultiHost(url);
    const nodes = [...nodesOf(u.hosts, 'redis_url (a cluster node)'), ...r.cluster_nodes.map((n) => parseHostPort(n, 'redis.cluster_nodes'))];
    if (nodes.length === 0) throw new ConfigError(`redis_url ${redactUrl(url)} lists no cluster node: redis+cluster://h1:6379,h2:6379`);
    return { kind: 'cluster', nodes: dedupe(nodes), tls: scheme.startsWith('rediss'), username: u.username, password: u.password, display: redactUrl(url) };
  }
  const auth = urlAuth(url);
  if (r.sentinels.length > 0 || r.sentinel_name) {
    if (r.cluster) throw new ConfigError('redis.cluster and redis.sentinels are both set: a Redis is either a Cluster or watched by sentinels; keep one');
    if (!r.sentinel_name) throw new ConfigError('redis.sentinels is set but redis.sentinel_name is not: set it to the master group name the sentinels monitor (`sentinel monitor <name> …`)');
    if (r.sentinels.length === 0) throw new ConfigError('redis.sentinel_name is set but redis.sentinels is empty: list the sentinels as host:port');
    const sentinels = r.sentinels.map((s) => parseHostPort(s, 'redis.sentinels'));
    const db = Number(/^\/(\d+)$/.exec(safeUrl(url)?.pathname ?? '')?.[1] ?? 0);
    const display = `sentinels ${sentinels.map(hp).join(',')} (master ${r.sentinel_name})`;
    return { kind: 'sentinel', sentinels, name: r.sentinel_name, db, tls: url.startsWith('rediss:'), ...auth, sentinelPassword: r.sentinel_password ?? undefined, display };
  }
  if (r.cluster) {
    const seeds = r.cluster_nodes.map((n) => parseHostPort(n, 'redis.cluster_nodes'));
    const u = config.redis_url ? safeUrl(config.redis_url) : null;
    if (u) seeds.unshift({ host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || 6379) });
    if (seeds.length === 0) throw new ConfigError('redis.cluster is true but no node is named: set redis.cluster_nodes (host:port list) or REDIS_URL to one node');
    const nodes = dedupe(seeds);
    return { kind: 'cluster', nodes, tls: url.startsWith('rediss:'), ...auth, display: `cluster ${nodes.map(hp).join(',')}` };
  }
  return { kind: 'single', url, ...auth, display: redactUrl(url) };
}

function dedupe(nodes: HostPort[]): HostPort[] {
  return [...new Map(nodes.map((n) => [hp(n), n])).values()];
}

function safeUrl(url: string): URL | null {
  try {
    return new URL(url);
  } catch {
    return null;
  }
}

function urlAuth(url: string): { username?: string; password?: string } {
  const u = safeUrl(url);
  if (!u) return {};
  return { ...(u.username ? { username: decodeURIComponent(u.username) } : {}), ...(u.password ? { password: decodeURIComponent(u.password) } : {}) };
}

/** The URL without its passwords (the user-info one and a `sentinel_password=` query), for messages. Works on multi-host forms. */
export function redactUrl(url: string): string {
  return url
    .replace(/^([a-z+]+:\/\/[^:@/]*:)[^@/]*@/i, '$1***@')
    .replace(/([?&](?:sentinel_)?password=)[^&#]*/gi, '$1***');
}
