/**
 * Who may use the dashboard: the pure access decisions, a `vcfleet dashboard` process that refuses a
 * non-loopback bind without credentials and answers 401/200 with them, bearer tokens, read-only
 * mode (403 on Bull Board's write API, the board itself marked read-only), cross-origin writes,
 * and job data trimmed for display.
 */
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { accessPolicy, authorized, checkBind, decide, isLoopback } from '../../src/dashboard/auth.ts';
import { trimForDisplay } from '../../src/dashboard/bull-board.ts';
import { startDashboard, type Dashboard } from '../../src/dashboard/server.ts';
import { loadConfig } from '../../src/shared/config.ts';
import { ConfigError } from '../../src/shared/errors.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { openQueue } from '../../src/shared/queues.ts';
import { createRedis } from '../../src/shared/redis.ts';
import { REDIS_URL, runCli, startCli, waitFor, type CliProcess } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';

const creds = { user: 'ops', password: 'pw-DASHSECRET', token: null };
const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`;

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

  it('checks basic credentials and bearer tokens', () => {
    const both = { ...creds, token: 'tok-123' };
    expect(authorized(basic('ops', 'pw-DASHSECRET'), both)).toBe(true);
    expect(authorized(basic('ops', 'wrong'), both)).toBe(false);
    expect(authorized('Bearer tok-123', both)).toBe(true);
    expect(authorized('bearer tok-124', both)).toBe(false);
    expect(authorized(undefined, both)).toBe(false);
    expect(authorized('Bearer tok-123', creds)).toBe(false);
  });

  it('decides reads, writes, read-only and origins', () => {
    const open = accessPolicy('127.0.0.1', { user: null, password: null, token: null }, false);
    expect(decide({ method: 'GET', host: '127.0.0.1:3000' }, open)).toBe('allow');
    expect(decide({ method: 'PUT', host: '127.0.0.1:3000' }, open)).toBe('allow');
    expect(decide({ method: 'GET', host: 'evil.example:3000' }, open)).toBe('bad_host');
    expect(decide({ method: 'PUT', host: '127.0.0.1:3000', origin: 'http://evil.example' }, open)).toBe('bad_origin');
    expect(decide({ method: 'PUT', host: '127.0.0.1:3000', origin: 'http://127.0.0.1:3000' }, open)).toBe('allow');

    const localWithCreds = accessPolicy('localhost', creds, false);
    expect(decide({ method: 'GET', host: 'localhost:3000' }, localWithCreds)).toBe('allow');
    expect(decide({ method: 'PUT', host: 'localhost:3000' }, localWithCreds)).toBe('unauthorized');
    expect(decide({ method: 'PUT', host: 'localhost:3000', authorization: basic('ops', 'pw-DASHSECRET') }, localWithCreds)).toBe('allow');

    const remote = accessPolicy('0.0.0.0', creds, true);
    expect(decide({ method: 'GET', host: 'fleet.internal' }, remote)).toBe('unauthorized');
    expect(decide({ method: 'GET', host: 'fleet.internal', authorization: basic('ops', 'pw-DASHSECRET') }, remote)).toBe('allow');
    expect(decide({ method: 'PUT', host: 'fleet.internal', authorization: basic('ops', 'pw-DASHSECRET') }, remote)).toBe('read_only');
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

  it('answers 401 without credentials and 200 with them on a non-loopback address', async () => {
    if (!(await freeHost('127.0.0.2'))) return; // no 127.0.0.2 on this host's loopback
    const p = startCli(['dashboard', '--host', '127.0.0.2', ...base], { VCFLEET_DASHBOARD_USER: 'ops', VCFLEET_DASHBOARD_PASSWORD: 'pw-DASHSECRET' });
    procs.push(p);
    const url = await waitFor('the dashboard URL', () => dashboardUrl(p) ?? (p.child.exitCode !== null ? Promise.reject(new Error(p.output())) : undefined), 30_000);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.2:\d+\/$/);
    for (const path of ['', 'api/runs', 'queues', 'queues/api/queues']) {
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
    expect((await fetch(`${dashboard.url}queues/api/queues/judge/pause`, { method: 'PUT' })).status).toBe(401);
    expect((await fetch(`${dashboard.url}queues/api/queues/judge/pause`, { method: 'PUT', headers: { ...auth, origin: 'http://evil.example' } })).status).toBe(403);
    expect((await fetch(`${dashboard.url}queues/api/queues/judge/pause`, { method: 'PUT', headers: auth })).status).toBeLessThan(300);
    const judge = openQueue('judge', redis, prefix);
    expect(await judge.isPaused()).toBe(true);
    await judge.resume();
    await judge.close();
  });
});
