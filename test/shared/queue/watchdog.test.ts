/**
 * The queue watchdog of every stage worker ("jobs waiting, none taken"), on a real Redis and a real
 * BullMQ worker: the worker's connections go through a TCP proxy whose established connections are
 * frozen while the worker waits for a job (as when a failover takes the node they talk to away
 * without a reset), the main one spared so the queue can still be read. A job is then added from
 * outside: the watchdog sees it wait with a free slot and none taken, logs one line, renews the
 * blocking connection, and the job runs; the recovery is counted in Redis for `vcfleet status`.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/shared/logger.ts';
import { enqueue, openQueue, rolloutId, type RolloutJob } from '../../../src/shared/queue/registry.ts';
import { createRedis, waitForRedis, type Redis } from '../../../src/shared/redis/connect.ts';
import { startStageWorker, type StageWorker } from '../../../src/shared/queue/stage-worker.ts';
import { readStalls, stallsLine } from '../../../src/shared/queue/stall-record.ts';
import { createFleetMetrics } from '../../../src/ops/prom-metrics.ts';
import { REDIS_URL, waitFor } from '../../helpers/fleet.ts';
import { startFreezeProxy, type FreezeProxy } from '../../helpers/freeze-proxy.ts';
import { deletePrefix } from '../../helpers/redis-keys.ts';

describe('the queue watchdog', () => {
  let proxy: FreezeProxy | undefined;
  let stage: StageWorker | undefined;
  const opened: Redis[] = [];
  const prefix = `vcftest-wd-${randomBytes(4).toString('hex')}`;
  afterEach(async () => {
    await stage?.close(100);
    stage = undefined;
    const direct = createRedis(REDIS_URL, 'client');
    await deletePrefix(direct, prefix);
    direct.disconnect();
    for (const r of opened.splice(0)) r.disconnect();
    await proxy?.close();
    proxy = undefined;
  });

  it('a worker whose blocking fetch went silent takes the waiting job again, with one line and a record', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const destination = new Writable({ write(chunk, _enc, done) { for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l)); done(); } });
    const logger = createLogger({ level: 'info', destination, json: true });
    const target = new URL(REDIS_URL);
    proxy = await startFreezeProxy({ host: target.hostname, port: Number(target.port || 6379) });
    const connection = createRedis(`redis://127.0.0.1:${proxy.port}`, 'worker');
    opened.push(connection);
    await waitForRedis(connection, 'the proxy');
    const direct = createRedis(REDIS_URL, 'client');
    opened.push(direct);
    const queue = openQueue('rollout', direct, prefix);

    const ran: string[] = [];
    const stalls: string[] = [];
    const metrics = createFleetMetrics({ role: 'sandbox' });
    stage = startStageWorker({
      queue: 'rollout', connection, prefix, concurrency: 1, lockDurationMs: 30_000, logger, name: 'wd-test-worker', stallMs: 1500,
      onStall: (info) => {
        stalls.push(info.queue);
        metrics.stallRecovered('rollout');
      },
      handle: async (data) => void ran.push(data.rollout_id),
    });
    const job = (n: number): RolloutJob => ({ v: 1, run_id: 'wd', task_id: `t${n}`, repeat: 0, rollout_id: rolloutId('wd', `t${n}`, 0) });
    await enqueue('rollout', queue, job(1));
    await waitFor('the first job to run', () => ran.length === 1, 20_000);
    // The worker is idle in its blocking fetch now (its own connections are the 2nd and later): silence them.
    await waitFor('the blocking connection', () => proxy!.connections() >= 2, 10_000);
    proxy.freeze(1);
    await enqueue('rollout', queue, job(2));

    await waitFor('the waiting job to run', () => ran.length === 2, 60_000).catch((err: Error) => {
      throw new Error(`${err.message} (${proxy!.connections()} connections through the proxy)\n${lines.map((l) => JSON.stringify(l)).join('\n')}`);
    });
    expect(ran).toEqual(['wd-t1-0', 'wd-t2-0']);
    const said = lines.filter((l) => /jobs waiting, none taken/.test(String(l.msg)));
    expect(said.length, JSON.stringify(lines)).toBeGreaterThanOrEqual(1);
    expect(said[0]).toMatchObject({ level: 40, queue: 'rollout', waiting: 1 });
    // Each recovery says how it found the blocking client (a single Redis: its status, no node count).
    expect(typeof said[0]!.blocking_status, JSON.stringify(said[0])).toBe('string');
    expect(said[0]!.blocking_nodes).toBeNull();
    expect(String(said[0].msg)).toMatch(/^jobs waiting, none taken: 1 job\(s\) in the rollout queue for \d+ s while this worker had a free slot; waking it$/);
    expect(stalls.length).toBe(said.length);
    expect(await metrics.registry.metrics()).toContain(`vcfleet_worker_stalls_recovered_total{queue="rollout",role="sandbox"} ${said.length}`);
    const recorded = await waitFor('the stall record', async () => (await readStalls(direct, prefix)).find((s) => s.queue === 'rollout'), 5000);
    expect(recorded).toMatchObject({ queue: 'rollout', recovered: said.length, last: { worker: 'wd-test-worker', waiting: 1, blocking_status: said.at(-1)!.blocking_status } });
    expect(stallsLine([recorded])).toMatch(/^queue watchdog: workers that sat idle with jobs waiting, recovered: rollout \d+ \(last at \S+, 1 job\(s\) waited \d+ s, blocking client [a-z]+\)$/);
    expect(stallsLine([{ queue: 'judge', recovered: 2, last: { at: 'now', worker: null, waiting: 3, stalled_s: 12, blocking_status: 'disconnecting', blocking_nodes: 0 } }])).toBe(
      'queue watchdog: workers that sat idle with jobs waiting, recovered: judge 2 (last at now, 3 job(s) waited 12 s, blocking client disconnecting with 0 node(s))',
    );
    await queue.close();
  });

  it('an idle queue, or a busy worker, is no stall', async () => {
    const lines: string[] = [];
    const destination = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const logger = createLogger({ level: 'info', destination, json: true });
    const connection = createRedis(REDIS_URL, 'worker');
    opened.push(connection);
    const direct = createRedis(REDIS_URL, 'client');
    opened.push(direct);
    const queue = openQueue('rollout', direct, prefix);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const ran: string[] = [];
    stage = startStageWorker({
      queue: 'rollout', connection, prefix, concurrency: 1, lockDurationMs: 30_000, logger, stallMs: 500,
      handle: async (data) => {
        ran.push(data.rollout_id);
        await held;
      },
    });
    const job = (n: number): RolloutJob => ({ v: 1, run_id: 'wd', task_id: `b${n}`, repeat: 0, rollout_id: rolloutId('wd', `b${n}`, 0) });
    await enqueue('rollout', queue, job(1));
    await enqueue('rollout', queue, job(2));
    await waitFor('the first job to run', () => ran.length === 1, 20_000);
    // The second job waits behind the first (concurrency 1) for several watchdog periods: not a stall.
    await new Promise((r) => setTimeout(r, 5000)); // several watchdog periods (2 s) past its 0.5 s threshold
    expect(lines.join('')).not.toMatch(/jobs waiting, none taken/);
    release();
    await waitFor('the second job to run', () => ran.length === 2, 20_000);
    expect(await readStalls(direct, prefix)).toEqual([]);
    await queue.close();
  });

  it('a queue paused for 40 s with jobs waiting gives no recovery (paused from vcfleet run or Bull Board); resumed, its jobs run', async () => {
    const lines: string[] = [];
    const destination = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const logger = createLogger({ level: 'info', destination, json: true });
    const connection = createRedis(REDIS_URL, 'worker');
    opened.push(connection);
    const direct = createRedis(REDIS_URL, 'client');
    opened.push(direct);
    const queue = openQueue('rollout', direct, prefix);
    const ran: string[] = [];
    const stalls: unknown[] = [];
    stage = startStageWorker({
      queue: 'rollout', connection, prefix, concurrency: 2, lockDurationMs: 30_000, logger, stallMs: 500,
      onStall: (info) => void stalls.push(info),
      handle: async (data) => void ran.push(data.rollout_id),
    });
    await stage.worker.waitUntilReady();
    await queue.pause();
    for (let n = 1; n <= 3; n++) await enqueue('rollout', queue, { v: 1, run_id: 'wd', task_id: `p${n}`, repeat: 0, rollout_id: rolloutId('wd', `p${n}`, 0) });
    const first = stage.worker;
    // The 40 s, in real time: past its 0.5 s threshold and three recovery spacings (12 s).
    await new Promise((r) => setTimeout(r, 40_000));
    expect(ran).toEqual([]);
    expect(lines.join('')).not.toMatch(/jobs waiting, none taken/);
    expect(stalls).toEqual([]);
    expect(stage.worker).toBe(first);
    expect(await readStalls(direct, prefix)).toEqual([]);
    await queue.resume();
    await waitFor('the jobs to run once resumed', () => ran.length === 3, 20_000);
    await queue.close();
  }, 90_000);
});
