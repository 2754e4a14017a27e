/**
 * A stage worker put aside for a new one (what the queue watchdog does to a wedged worker), on a real
 * Redis and real BullMQ workers, while jobs arrive: a worker holding a job is never replaced (it is not
 * wedged), an idle one is replaced only once it has stopped fetching and closed, so a job it took can
 * neither lose its lock nor run twice. Locks are short (1 s) and jobs longer (3 s): a job whose lock
 * was dropped would be found stalled and run again by the new worker.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/shared/logger.ts';
import { enqueue, openQueue, rolloutId, type RolloutJob } from '../../../src/shared/queue/registry.ts';
import { createRedis, type Redis } from '../../../src/shared/redis/connect.ts';
import { startStageWorker, type StageWorker } from '../../../src/shared/queue/stage-worker.ts';
import { REDIS_URL, waitFor } from '../../helpers/fleet.ts';
import { deletePrefix } from '../../helpers/redis-keys.ts';

describe('replacing a stage worker', () => {
  let stage: StageWorker | undefined;
  const opened: Redis[] = [];
  const prefix = `vcftest-sw-${randomBytes(4).toString('hex')}`;
  afterEach(async () => {
    await stage?.close(100);
    stage = undefined;
    const direct = createRedis(REDIS_URL, 'client');
    await deletePrefix(direct, prefix);
    direct.disconnect();
    for (const r of opened.splice(0)) r.disconnect();
  });

  it('while jobs arrive, a replaced worker never runs a job twice', async () => {
    const logger = createLogger({ level: 'silent' });
    const connection = createRedis(REDIS_URL, 'worker');
    const direct = createRedis(REDIS_URL, 'client');
    opened.push(connection, direct);
    const queue = openQueue('rollout', direct, prefix);
    const runs = new Map<string, number>();
    stage = startStageWorker({
      queue: 'rollout', connection, prefix, concurrency: 2, lockDurationMs: 1000, logger, stallMs: 60_000,
      handle: async (data) => {
        runs.set(data.rollout_id, (runs.get(data.rollout_id) ?? 0) + 1);
        await new Promise((r) => setTimeout(r, 3000));
      },
    });
    const job = (n: number): RolloutJob => ({ v: 1, run_id: 'sw', task_id: `j${n}`, repeat: 0, rollout_id: rolloutId('sw', `j${n}`, 0) });
    const JOBS = 8;
    const whileRunning: boolean[] = [];
    for (let n = 1; n <= JOBS; n++) {
      await enqueue('rollout', queue, job(n));
      // Replace as the job arrives (it may be taken meanwhile), and again while it runs.
      const asItArrives = stage.replaceWorker!();
      await waitFor(`job ${n} to start`, () => runs.has(job(n).rollout_id), 20_000);
      whileRunning.push(await stage.replaceWorker!());
      await asItArrives;
    }
    await waitFor('every job to finish', async () => (await queue.getJobCounts('completed')).completed === JOBS, 60_000);
    // Past a lock's expiry and a stall check more: a dropped lock would have brought a job back by now.
    await new Promise((r) => setTimeout(r, 3000));
    expect([...runs.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    expect(runs.size).toBe(JOBS);
    // A worker holding a job (or being replaced already) stays as it is.
    expect(whileRunning).toEqual(Array(JOBS).fill(false));
    await queue.close();
  }, 120_000);
});
