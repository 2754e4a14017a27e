/**
 * The worker registry on a real Redis: live workers with their notices (sandbox limits not enforced)
 * show in `vcfleet status`, a worker that stops cleanly leaves no record, and one that stops
 * heartbeating is listed as such with the jobs of the run it held.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runStatus } from '../../../src/ops/run-status.ts';
import { produceRun } from '../../../src/producer/produce.ts';
import { loadPreparedBenchmark } from '../../../src/prepare/load-prepared.ts';
import { createRedis, type Redis } from '../../../src/shared/redis/connect.ts';
import { announceWorker, listWorkers, STALE_AFTER_MS } from '../../../src/shared/queue/worker-registry.ts';
import { createScriptedAgent } from '../../../src/agent/scripted-agent.ts';
import { startSandboxWorker } from '../../../src/workers/sandbox/worker.ts';
import { makeFleetEnv, REDIS_URL, waitFor, type FleetEnv } from '../../helpers/fleet.ts';
import { removeTmpDirs } from '../../helpers/tmp.ts';

describe('worker registry', () => {
  let env: FleetEnv;
  let client: Redis;
  let worker: Redis;

  beforeAll(async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: 'http://127.0.0.1:9/v1', overrides: ['++run_id=reg'] });
    client = createRedis(REDIS_URL, 'client');
    worker = createRedis(REDIS_URL, 'worker');
    const config = env.config();
    const bench = await loadPreparedBenchmark(config.data_dir, config.benchmark);
    await produceRun({ config, redis: client, logger: env.logger, tasks: bench.tasks, readImage: bench.readImage });
  });
  afterAll(async () => {
    client?.disconnect();
    worker?.disconnect();
    await env?.cleanup();
    removeTmpDirs();
  });

  it('lists live workers with their notices, forgets those that stop, and names the jobs a silent one held', async () => {
    const judge = await announceWorker(client, env.prefix, 'judge');
    const sandbox = await announceWorker(client, env.prefix, 'sandbox');
    await sandbox.notice('sandbox limits NOT enforced on test (sandbox_config.enforce_resources=false): disk (no root)');
    const agent = createScriptedAgent({ '*': { answer: '@gold', delay_ms: 60_000 } });
    const stage = await startSandboxWorker({ config: env.config(), connection: worker, logger: env.logger, agent, workerName: sandbox.id });
    try {
      let status = await waitFor('both rollouts running', async () => {
        const s = await runStatus(client, env.prefix, 'reg');
        return s.jobs.rollout.active === 2 ? s : undefined;
      }, 30_000);
      expect(status.workers.live.map((w) => w.role).sort()).toEqual(['judge', 'sandbox']);
      expect(status.workers.stale).toEqual([]);
      expect(status.warnings).toContain('sandbox limits NOT enforced on test (sandbox_config.enforce_resources=false): disk (no root)');

      // Seen from a minute later, a worker that stopped heartbeating is stale, with the jobs it holds.
      status = await runStatus(client, env.prefix, 'reg', Date.now() + STALE_AFTER_MS + 20_000);
      const silent = status.workers.stale.find((w) => w.id === sandbox.id)!;
      expect(silent.held.sort()).toEqual(['rollout/reg-bv-001-0', 'rollout/reg-bv-002-0']);
      expect(status.warnings).not.toContain(expect.stringMatching(/NOT enforced/));

      await judge.stop();
      expect((await listWorkers(client, env.prefix)).live.map((w) => w.role)).toEqual(['sandbox']);
    } finally {
      await stage.close(100);
      await sandbox.stop();
    }
    expect(await listWorkers(client, env.prefix)).toEqual({ live: [], stale: [] });
  });
});
