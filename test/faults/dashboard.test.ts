/**
 * An exposed dashboard (bound beyond loopback) over a run with a failed job: an unauthenticated
 * write is refused and changes nothing in Redis; the token holder's write goes through; the token
 * never appears in the dashboard's output. (test/dashboard/dashboard-access.test.ts covers every route.)
 */
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { REDIS_URL, startCli, waitFor, type CliProcess } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';

const TOKEN = 'dash-token-FLEETSECRET-0003';

describe('exposed dashboard under attack', () => {
  const prefix = `vcftest-fdash-${randomBytes(4).toString('hex')}`;
  const redis = new Redis(REDIS_URL);
  let dash: CliProcess | undefined;
  afterAll(async () => {
    if (dash && dash.child.exitCode === null) dash.child.kill('SIGKILL');
    await dash?.exited;
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('refuses unauthenticated writes: the failed job stays failed until the token holder retries it', async () => {
    const q = openQueue('rollout', redis, prefix);
    await q.add('rollout', { v: 1, run_id: 'd', task_id: 't', repeat: 0, rollout_id: 'd-t-0' }, { jobId: 'd-t-0' });
    // A job is failed by the worker holding it: one that always throws.
    const { Worker } = await import('bullmq');
    const conn = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    const w = new Worker('rollout', async () => { throw new Error('scripted failure'); }, { connection: conn, prefix, autorun: true });
    await waitFor('the job to fail', async () => (await q.getJobState('d-t-0')) === 'failed', 20_000, 100);
    await w.close();
    conn.disconnect();

    dash = startCli(['dashboard', '--host', '127.0.0.2', '--port', '0', `++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`], { VCFLEET_DASHBOARD_TOKEN: TOKEN });
    const url = await waitFor('the dashboard URL', () => /dashboard: (http:\/\/\S+\/) /.exec(dash!.stdout())?.[1], 30_000, 100);
    expect(url).toContain('127.0.0.2');
    for (const [method, path] of [['PUT', 'queues/api/queues/rollout/d-t-0/retry'], ['PUT', 'queues/api/queues/rollout/retry/failed'], ['PUT', 'queues/api/queues/rollout/pause'], ['PUT', 'queues/api/queues/rollout/clean/failed']]) {
      const res = await fetch(`${url}${path}`, { method });
      expect(res.status, `${method} ${path}`).toBe(401);
      const wrong = await fetch(`${url}${path}`, { method, headers: { authorization: 'Bearer not-the-token' } });
      expect(wrong.status, `${method} ${path} with a wrong token`).toBe(401);
    }
    expect(await q.getJobState('d-t-0')).toBe('failed');
    expect(await q.isPaused()).toBe(false);
    const ok = await fetch(`${url}queues/api/queues/rollout/d-t-0/retry`, { method: 'PUT', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBeLessThan(300);
    expect(await q.getJobState('d-t-0')).toBe('waiting');
    await q.close();
    dash.child.kill('SIGTERM');
    expect(await dash.exited).toBe(0);
    expect(dash.output()).not.toContain(TOKEN);
  });
});
