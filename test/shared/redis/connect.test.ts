/**
 * A Redis that cannot be used stops every role within `redis.connect_timeout_s` with one line that
 * names the URL (password masked), the error Redis or the network gave, and what to do: nothing
 * listening, a password missing or wrong, a server that accepts and never answers. Real processes
 * against a real redis-server of the test's own (with `requirepass`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../src/all-in-one/private-redis.ts';
import { unreachableMessage } from '../../../src/shared/redis/connect.ts';
import { runCli, waitFor } from '../../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';

const PASSWORD = 'fleet-redis-pw-7c1e';

describe('an unusable Redis fails every role in seconds, saying why', () => {
  let redis: ChildProcess;
  let port: number;
  let silent: net.Server;
  let silentPort: number;
  const sockets = new Set<net.Socket>();
  beforeAll(async () => {
    port = await freePort();
    redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--requirepass', PASSWORD, '--save', '', '--appendonly', 'yes', '--dir', createTmpDir('vcfleet-redis-pw-')], { stdio: 'ignore' });
    await waitFor('redis-server to listen', () => new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => s.end(() => resolve(true))).once('error', () => resolve(false));
    }), 10_000, 100);
    // Accepts connections and never answers (a firewall that swallows, a wrong service).
    silent = net.createServer((socket) => void sockets.add(socket)).listen(0, '127.0.0.1');
    await new Promise((r) => silent.once('listening', r));
    silentPort = (silent.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    const exited = new Promise((resolve) => redis.once('exit', resolve));
    redis.kill('SIGTERM');
    await exited;
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
    removeTmpDirs();
  });

  const role = (url: string, ...args: string[]) =>
    runCli([...args, `++redis_url=${url}`, '++redis.connect_timeout_s=3', '++preflight.enabled=false', '++queues.prefix=vcftest-connect']);

  it('nothing listening: a worker stops with the URL, ECONNREFUSED and what to start', async () => {
    const closed = await freePort();
    const out = await role(`redis://127.0.0.1:${closed}`, 'worker', 'judge');
    expect(out.code, out.output).toBe(2);
    expect(out.output).toContain(`cannot reach Redis at redis://127.0.0.1:${closed}`);
    expect(out.output).toMatch(/ECONNREFUSED.*nothing listens there: start redis-server/);
  });

  it('no password or a wrong one: NOAUTH / WRONGPASS, the password masked, how to put it in REDIS_URL', async () => {
    const none = await role(`redis://127.0.0.1:${port}`, 'worker', 'results');
    expect(none.code, none.output).toBe(2);
    expect(none.output).toMatch(/NOAUTH.*Redis wants a password: set it in REDIS_URL \(redis:\/\/:PASSWORD@host:6379/);
    const wrong = await role(`redis://:not-the-password@127.0.0.1:${port}`, 'status', '--run-id', 'x');
    expect(wrong.code, wrong.output).toBe(2);
    expect(wrong.output).toMatch(/cannot reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+\/?: WRONGPASS/);
    expect(wrong.output).not.toContain('not-the-password');
    const right = await role(`redis://:${PASSWORD}@127.0.0.1:${port}`, 'runs');
    expect(right.code, right.output).toBe(0);
    expect(right.output).not.toContain(PASSWORD);
  });

  it('a server that never answers: the worker gives up after redis.connect_timeout_s instead of waiting for ever', async () => {
    const started = Date.now();
    const out = await role(`redis://127.0.0.1:${silentPort}`, 'worker', 'sandbox');
    expect(out.code, out.output).toBe(2);
    expect(out.output).toMatch(/no answer within 3 s, redis\.connect_timeout_s\).*check the address, the port and the firewall/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(3000);
  });

  it('protected mode (what Redis answers a remote client when it has no password) gets its own advice', () => {
    const denied = 'DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user.';
    expect(unreachableMessage('redis://10.0.0.5:6379', denied)).toMatch(/^cannot reach Redis at redis:\/\/10\.0\.0\.5:6379\/?: DENIED .*give it a password \(requirepass, or an ACL user\)/);
  });
});
