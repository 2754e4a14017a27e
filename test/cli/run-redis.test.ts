/**
 * Every command that reads runs finds them by one rule: REDIS_URL, else this folder's private Redis
 * when it has data (saying so); a Redis that refuses the connection fails the command at once with
 * exit 2 naming it. After a `vcfleet run` without REDIS_URL, `runs` and `dashboard` see the same run.
 */
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/all-in-one/private-redis.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { makeFleetEnv, runCli, startCli, waitFor, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

describe('commands that read runs find the same Redis', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  beforeAll(async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url });
  });
  afterAll(async () => {
    removeTmpDirs();
  });

  it('a Redis that refuses the connection: exit 2 naming it, for runs, status, retry, dashboard and serve', async () => {
    const closed = `redis://127.0.0.1:${await freePort()}`;
    const where = [...env.overrides.filter((o) => !o.startsWith('++redis_url=')), `++redis_url=${closed}`];
    for (const args of [['runs'], ['status', '--run-id', 'x'], ['retry', '--run-id', 'x'], ['dashboard', '--port', '0'], ['serve', '--port', '0']]) {
      const r = await runCli([...args, ...where]);
      expect(r.code, `${args[0]}: ${r.output}`).toBe(2);
      expect(r.output).toContain(`no Redis at ${closed} (connection refused`);
    }
  }, 180_000);

  it('at start, run and status exit 2 naming the problem: refused, a port where HTTP listens, a port that accepts and never answers', async () => {
    const web = http.createServer((_req, res) => res.end('hello')).listen(0, '127.0.0.1');
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((socket) => void sockets.add(socket)).listen(0, '127.0.0.1');
    await Promise.all([web, silent].map((s) => new Promise((r) => s.once('listening', r))));
    const portOf = (s: net.Server) => (s.address() as net.AddressInfo).port;
    const without = env.overrides.filter((o) => !o.startsWith('++redis_url='));
    try {
      const cases: Array<[string, RegExp]> = [
        ['redis://127.0.0.1:1', /cannot reach Redis at redis:\/\/127\.0\.0\.1:1\/?: .*ECONNREFUSED.*nothing listens there|no Redis at redis:\/\/127\.0\.0\.1:1\/? \(connection refused/],
        [`redis://127.0.0.1:${portOf(web)}`, /something else listens there \(it answered PING with "HTTP\/1\.1 400 Bad Request"/],
        // Not after redis.connect_timeout_s (15 s by default) of retries: the first 5 s of silence say it.
        [`redis://127.0.0.1:${portOf(silent)}`, /it accepts connections but did not answer PING within 5 s/],
      ];
      for (const [url, said] of cases) {
        for (const args of [['run', '--run-id', 'unreachable'], ['status', '--run-id', 'x']]) {
          const r = await runCli([...args, ...without], { REDIS_URL: url });
          expect(r.code, `${args[0]} ${url}: ${r.output}`).toBe(2);
          expect(r.output, `${args[0]} ${url}`).toMatch(said);
        }
      }
    } finally {
      for (const socket of sockets) socket.destroy();
      web.closeAllConnections();
      await Promise.all([web, silent].map((s) => new Promise((r) => s.close(r))));
    }
  }, 240_000);

  it('after vcfleet run without REDIS_URL: runs and the dashboard both read the private Redis of the folder, and say so', async () => {
    const local = env.overrides.filter((o) => !o.startsWith('++redis_url='));
    const run = await runCli(['run', '--run-id', 'found-1', ...local]);
    expect(run.code, run.output).toBe(0);
    const listed = await runCli(['runs', ...local]);
    expect(listed.code, listed.output).toBe(0);
    expect(listed.stdout).toMatch(/^found-1 +babyvision_opencode/m);
    const dashboard = startCli(['dashboard', '--port', '0', ...local]);
    try {
      await waitFor('the dashboard to start', async () => dashboard.stdout().includes('dashboard: http://'), 60_000, 200);
      expect(dashboard.stdout()).toMatch(/runs in the private Redis of \S+\/state\/redis/);
      const url = /dashboard: (http:\/\/\S+?)\/? /.exec(dashboard.stdout())![1];
      const overview = await (await fetch(`${url}/`)).text();
      expect(overview).toContain('found-1');
    } finally {
      dashboard.child.kill('SIGTERM');
      await dashboard.exited;
    }
    // It says what it stops: it holds no rollout.
    expect(dashboard.output()).toContain('SIGTERM: stopping the dashboard');
    expect(dashboard.output()).not.toContain('rollouts go back to the queue');
  }, 180_000);
});
