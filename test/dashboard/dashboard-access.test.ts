/**
 * Who may use the dashboard: the access decisions (the guard in front of a one-route app), a
 * `vcfleet dashboard` process that refuses a non-loopback bind without credentials and answers
 * 401/200 with them on every route (the run overview, Bull Board, the rollout viewer), bearer
 * tokens, read-only mode (403 on Bull Board's write API, the board itself marked read-only),
 * cross-origin writes, Host headers of a loopback dashboard, and job data trimmed for display.
 */
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Hono } from 'hono';
import { accessGuard, accessPolicy, checkBind, isLoopback, type AccessPolicy } from '../../src/http/access.ts';
import { trimForDisplay } from '../../src/dashboard/bull-board.ts';
import { startDashboard, type Dashboard } from '../../src/dashboard/server.ts';
import { loadConfig } from '../../src/shared/config/load.ts';
import { ConfigError } from '../../src/shared/errors.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { createRedis } from '../../src/shared/redis/connect.ts';
import { REDIS_URL, runCli, startCli, waitFor, type CliProcess } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';
import { statusWithHost } from '../helpers/http.ts';

const creds = { user: 'ops', password: 'pw-DASHSECRET', token: null };
const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`;

/** A one-route app behind the guard: what the guard decides is all that can differ. */
function guarded(policy: AccessPolicy): Hono {
  const app = new Hono();
  app.use('*', accessGuard(policy));
  app.all('*', (c) => c.text('handled\n'));
  return app;
}

/** The guard's decision on one request, named by what its answer says. */
async function decide(app: Hono, method: string, headers: Record<string, string>): Promise<string> {
  const res = await app.request('/x', { method, headers });
  const body = await res.text();
  if (res.status === 200 && body === 'handled\n') return 'allow';
  if (res.status === 401) return 'unauthorized';
  if (res.status === 403 && body.includes('read-only')) return 'read_only';
  if (res.status === 403 && body.includes('Host header')) return 'bad_host';
  if (res.status === 403 && body.includes('cross-origin')) return 'bad_origin';
  return `HTTP ${res.status}: ${body}`;
}

describe('dashboard access decisions', () => {
  it('counts only 127.0.0.1, ::1 and localhost as loopback', () => {
    for (const h of ['127.0.0.1', '::1', 'localhost', 'LOCALHOST']) expect(isLoopback(h)).toBe(true);
    for (const h of ['127.0.0.2', '0.0.0.0', '::', '10.0.0.5', 'example.org']) expect(isLoopback(h)).toBe(false);
  });

  it('refuses a non-loopback bind without credentials, naming the variables to set', () => {
    expect(() => checkBind('0.0.0.0', { user: null, password: null, token: null })).toThrow(ConfigError);
    expect(() => checkBind('0.0.0.0', { user: null, password: null, token: null })).toThrow(/VCFLEET_DASHBOARD_USER.*VCFLEET_DASHBOARD_PASSWORD.*VCFLEET_DASHBOARD_TOKEN/);
    expect(() => checkBind('0.0.0.0', { user: 'u', password: null, token: null })).toThrow(/both/);
    expect(() => checkBind('0.0.0.0', creds)).not.toThrow();
    expect(() => checkBind('0.0.0.0', { user: null, password: null, token: 't' })).not.toThrow();
    expect(() => checkBind('127.0.0.1', { user: null, password: null, token: null })).not.toThrow();
  });

  it('refuses a user name with a colon and a token no bearer header can carry', () => {
    expect(() => checkBind('0.0.0.0', { user: 'ops:x', password: 'pw', token: null })).toThrow(/may not contain ":"/);
    expect(() => checkBind('127.0.0.1', { user: null, password: null, token: 'two words' })).toThrow(/VCFLEET_DASHBOARD_TOKEN.*may hold only/);
    expect(() => checkBind('0.0.0.0', { user: null, password: null, token: 'tok-123_~+/.==' })).not.toThrow();
  });

  it('checks basic credentials and bearer tokens', async () => {
    const both = guarded(accessPolicy('0.0.0.0', { ...creds, token: 'tok-123' }, false));
    expect(await decide(both, 'GET', { authorization: basic('ops', 'pw-DASHSECRET') })).toBe('allow');
    expect(await decide(both, 'GET', { authorization: basic('ops', 'wrong') })).toBe('unauthorized');
    expect(await decide(both, 'GET', { authorization: basic('OPS', 'pw-DASHSECRET') })).toBe('unauthorized');
    expect(await decide(both, 'GET', { authorization: 'Bearer tok-123' })).toBe('allow');
    expect(await decide(both, 'GET', { authorization: 'bearer tok-124' })).toBe('unauthorized');
    expect(await decide(both, 'GET', {})).toBe('unauthorized');
    expect(await decide(guarded(accessPolicy('0.0.0.0', creds, false)), 'GET', { authorization: 'Bearer tok-123' })).toBe('unauthorized');
    // A token-only dashboard: a header of another scheme is malformed for it (400, as RFC 6750 says), never let through.
    const tokenOnly = guarded(accessPolicy('0.0.0.0', { user: null, password: null, token: 'tok-123' }, false));
    expect((await tokenOnly.request('/x', { headers: { authorization: basic('ops', 'pw-DASHSECRET') } })).status).toBe(400);
    const challenge = await both.request('/x');
    expect(challenge.headers.get('www-authenticate')).toMatch(/^Basic realm="vcfleet dashboard"/);
    expect(await challenge.text()).not.toContain('pw-DASHSECRET');
  });

  it('decides reads, writes, read-only and origins', async () => {
    const open = guarded(accessPolicy('127.0.0.1', { user: null, password: null, token: null }, false));
    expect(await decide(open, 'GET', { host: '127.0.0.1:3000' })).toBe('allow');
    expect(await decide(open, 'PUT', { host: '127.0.0.1:3000' })).toBe('allow');
    expect(await decide(open, 'GET', { host: 'evil.example:3000' })).toBe('bad_host');
    expect(await decide(open, 'PUT', { host: '127.0.0.1:3000', origin: 'http://evil.example' })).toBe('bad_origin');
    expect(await decide(open, 'PUT', { host: '127.0.0.1:3000', origin: 'http://127.0.0.1:3000' })).toBe('allow');
    // A form a page elsewhere posts, and a write a browser marks as cross-site with no Origin.
    expect(await decide(open, 'POST', { host: '127.0.0.1:3000', origin: 'http://evil.example', 'content-type': 'application/x-www-form-urlencoded' })).toBe('bad_origin');
    expect(await decide(open, 'PUT', { host: '127.0.0.1:3000', 'sec-fetch-site': 'cross-site' })).toBe('bad_origin');
    expect(await decide(open, 'PUT', { host: '127.0.0.1:3000', 'sec-fetch-site': 'same-origin' })).toBe('allow');

    const localWithCreds = guarded(accessPolicy('localhost', creds, false));
    expect(await decide(localWithCreds, 'GET', { host: 'localhost:3000' })).toBe('allow');
    expect(await decide(localWithCreds, 'PUT', { host: 'localhost:3000' })).toBe('unauthorized');
    expect(await decide(localWithCreds, 'PUT', { host: 'localhost:3000', authorization: basic('ops', 'pw-DASHSECRET') })).toBe('allow');

    const remote = guarded(accessPolicy('0.0.0.0', creds, true));
    expect(await decide(remote, 'GET', { host: 'fleet.internal' })).toBe('unauthorized');
    expect(await decide(remote, 'GET', { host: 'fleet.internal', authorization: basic('ops', 'pw-DASHSECRET') })).toBe('allow');
    expect(await decide(remote, 'PUT', { host: 'fleet.internal', authorization: basic('ops', 'pw-DASHSECRET') })).toBe('read_only');
  });

  it('trims long strings of job data for display only', () => {
    const data = { v: 1, outcome: { response_tail: 'x'.repeat(4000), turns: 3 }, list: ['y'.repeat(700)] };
    const shown = trimForDisplay(data, 100) as typeof data;
    expect(shown.outcome.response_tail).toMatch(/^x{100}… \(3900 more characters\)$/);
    expect(shown.outcome.turns).toBe(3);
    expect(shown.list[0].length).toBeLessThan(150);
    expect(data.outcome.response_tail).toHaveLength(4000);
  });
});

async function freeHost(host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer().once('error', () => resolve(false)).listen(0, host, () => s.close(() => resolve(true)));
  });
}

function dashboardUrl(p: CliProcess): string | undefined {
  return /dashboard: (http:\/\/\S+\/) /.exec(p.stdout())?.[1];
}

const cleanupPrefix = deletePrefix;

describe('vcfleet dashboard access (process and server)', () => {
  const prefix = `vcftest-dash-${randomBytes(4).toString('hex')}`;
  const base = [`++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`, '++dashboard.port=0'];
  const procs: CliProcess[] = [];
  let dashboard: Dashboard | undefined;
  const redis = createRedis(REDIS_URL, 'worker');
  afterEach(async () => {
    for (const p of procs.splice(0)) if (p.child.exitCode === null) {
      p.child.kill('SIGTERM');
      await p.exited;
    }
    await dashboard?.close();
    dashboard = undefined;
  });
  afterAll(async () => {
    await cleanupPrefix(redis, prefix);
    redis.disconnect();
  });

  it('refuses to start on a non-loopback address without credentials', async () => {
    const r = await runCli(['dashboard', '--host', '127.0.0.2', ...base]);
    expect(r.code).toBe(2);
    expect(r.output).toMatch(/refusing to serve the dashboard on 127\.0\.0\.2 without credentials/);
    expect(r.output).toContain('VCFLEET_DASHBOARD_USER');
    expect(r.output).toContain('VCFLEET_DASHBOARD_TOKEN');
  });

  it('answers 401 without credentials and 200 with them on a non-loopback address', async (ctx) => {
    if (!(await freeHost('127.0.0.2'))) ctx.skip('127.0.0.2 is not on this host\'s loopback');
    const p = startCli(['dashboard', '--host', '127.0.0.2', ...base], { VCFLEET_DASHBOARD_USER: 'ops', VCFLEET_DASHBOARD_PASSWORD: 'pw-DASHSECRET' });
    procs.push(p);
    const url = await waitFor('the dashboard URL', () => dashboardUrl(p) ?? (p.child.exitCode !== null ? Promise.reject(new Error(p.output())) : undefined), 30_000);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.2:\d+\/$/);
    for (const path of ['', 'api/runs', 'queues', 'queues/api/queues', 'viewer/', 'viewer/api/runs', 'viewer/assets/viewer.js']) {
      const anon = await fetch(`${url}${path}`);
      expect(anon.status, path).toBe(401);
      expect(anon.headers.get('www-authenticate')).toMatch(/^Basic/);
      expect((await fetch(`${url}${path}`, { headers: { authorization: basic('ops', 'wrong') } })).status).toBe(401);
      expect((await fetch(`${url}${path}`, { headers: { authorization: basic('ops', 'pw-DASHSECRET') } })).status, path).toBe(200);
    }
    expect(p.output()).not.toContain('pw-DASHSECRET');
  });

  it('accepts a bearer token, and in read-only mode refuses every write with 403', async () => {
    const config = loadConfig({ overrides: [...base, '++dashboard.host=127.0.0.1', '++dashboard.token=tok-DASHSECRET', '++dashboard.read_only=true'], env: {} });
    dashboard = await startDashboard({ config, logger: createLogger({ level: 'silent' }), redis });
    const rollout = openQueue('rollout', redis, prefix);
    const job = await rollout.add('rollout', { v: 1, run_id: 'ro', task_id: 't', repeat: 0, rollout_id: 'ro-t-0' }, { jobId: 'ro-t-0' });
    await rollout.close();
    const auth = { authorization: 'Bearer tok-DASHSECRET' };
    const board = await (await fetch(`${dashboard.url}queues/api/queues`, { headers: auth })).json();
    expect(board.queues.map((q: { name: string }) => q.name).sort()).toEqual(['judge', 'results', 'rollout']);
    expect(board.queues.every((q: { readOnlyMode: boolean }) => q.readOnlyMode)).toBe(true);
    const writes: Array<[string, string]> = [
      ['PUT', `queues/api/queues/rollout/${job.id}/retry`],
      ['PUT', 'queues/api/queues/rollout/pause'],
      ['PUT', 'queues/api/queues/rollout/clean/failed'],
      ['PUT', `queues/api/queues/rollout/${job.id}/promote`],
      ['POST', 'queues/api/queues/rollout/add'],
    ];
    for (const [method, path] of writes) {
      expect((await fetch(`${dashboard.url}${path}`, { method, headers: auth })).status, path).toBe(403);
      expect((await fetch(`${dashboard.url}${path}`, { method })).status, path).toBe(401);
    }
    const after = openQueue('rollout', redis, prefix);
    expect(await after.isPaused()).toBe(false);
    expect(await (await after.getJob('ro-t-0'))?.getState()).toBe('waiting');
    await after.close();
  });

  it('lets an authorized write through when not read-only, and refuses cross-origin writes', async () => {
    const config = loadConfig({ overrides: [...base, '++dashboard.token=tok-DASHSECRET'], env: {} });
    dashboard = await startDashboard({ config, logger: createLogger({ level: 'silent' }), redis });
    const auth = { authorization: 'Bearer tok-DASHSECRET' };
    expect((await fetch(`${dashboard.url}api/runs`)).status).toBe(200);
    // The rollout viewer answers only loopback names too (DNS rebinding), and only reads.
    expect(await statusWithHost(`${dashboard.url}viewer/api/runs`, 'attacker.example')).toBe(403);
    expect(await statusWithHost(`${dashboard.url}viewer/api/runs`, `localhost:${dashboard.port}`)).toBe(200);
    expect((await fetch(`${dashboard.url}queues/api/queues/judge/pause`, { method: 'PUT' })).status).toBe(401);
    expect((await fetch(`${dashboard.url}queues/api/queues/judge/pause`, { method: 'PUT', headers: { ...auth, origin: 'http://evil.example' } })).status).toBe(403);
    // A JSON write from a page elsewhere needs a CORS preflight first: it is never granted.
    const preflight = await fetch(`${dashboard.url}queues/api/queues/judge/pause`, { method: 'OPTIONS', headers: { origin: 'http://evil.example', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'content-type' } });
    expect(preflight.status).toBeGreaterThanOrEqual(400);
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
    expect((await fetch(`${dashboard.url}queues/api/queues/judge/pause`, { method: 'PUT', headers: auth })).status).toBeLessThan(300);
    const judge = openQueue('judge', redis, prefix);
    expect(await judge.isPaused()).toBe(true);
    await judge.resume();
    await judge.close();
  });
});
