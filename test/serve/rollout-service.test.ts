/**
 * Serve's acceptance of a rollout id under concurrency (real Redis, a prefix of its own, two services on
 * connections of their own as two serve processes would be): 20 requests at once per round, half of them
 * with another weight version (or another row) under the same `_ng_rollout_id`, over 8 rounds. Whoever
 * wins, the id is one rollout of one identity: every request of that identity is accepted (one job,
 * one record), every other one is refused with 409, never attached to the winner's rollout.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/shared/config/load.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { RequestStore } from '../../src/shared/stores/request-store.ts';
import { createServiceRun } from '../../src/producer/produce.ts';
import { RolloutService } from '../../src/serve/rollout-service.ts';
import { parseRunBody, RequestRefused } from '../../src/serve/gym-request.ts';
import { serveRolloutId } from '../../src/serve/request-record.ts';
import { REDIS_URL } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { gymRow } from '../helpers/serve.ts';

const prefix = `vcftest-serve-race-${randomBytes(4).toString('hex')}`;
const logger = createLogger({ level: 'silent' });
const ROUNDS = 8;
const PER_ROUND = 20;

describe('serve accepts a rollout id in one atomic step', () => {
  const conns: Redis[] = [];
  const services: RolloutService[] = [];

  beforeAll(() => {
    for (let i = 0; i < 3; i++) conns.push(createRedis(REDIS_URL, 'worker'));
  });
  afterAll(async () => {
    for (const s of services) await s.close();
    await deletePrefix(conns[0]!, prefix);
    for (const c of conns) c.disconnect();
    removeTmpDirs();
  });

  it(`${PER_ROUND} concurrent requests per round over ${ROUNDS} rounds: every mismatch is a 409, one rollout per id`, async () => {
    const dir = createTmpDir('vcfleet-serve-race-');
    const config = loadConfig({ overrides: [`++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`, '++run_id=race', `++output_jsonl_fpath=${path.join(dir, 'race.jsonl')}`], env: {} });
    const { run } = await createServiceRun({ config, redis: conns[0]!, logger });
    for (const c of conns.slice(1)) services.push(new RolloutService({ config, redis: c, run, logger }));
    const bounds = { maxImageBytes: 1 << 20, maxImages: 4, allowedBaseUrls: [config.policy_base_url] };
    const queue = openQueue('rollout', conns[0]!, prefix, { scope: run.queue_scope });
    const requests = new RequestStore(conns[0]!, prefix);
    const failures: string[] = [];
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const id = `task${round}-r0`;
        // Even rounds: one row, two weight versions; odd rounds: one weight version, two rows.
        const variant = (k: number) =>
          round % 2 === 0
            ? gymRow('Which one?', 'A', { _ng_rollout_id: id, policy: { weight_version: `step-${k}` } })
            : gymRow(`Which one, row ${k}?`, 'A', { _ng_rollout_id: id, policy: { weight_version: 'step-1' } });
        const asked = Array.from({ length: PER_ROUND }, (_, i) => i % 2);
        const outcomes = await Promise.allSettled(asked.map((k, i) => services[i % services.length]!.accept(parseRunBody(variant(k), bounds))));
        const record = await requests.findTask(run.run_id, serveRolloutId(run.run_id, id));
        expect(record, `round ${round}: the id has its record`).not.toBeNull();
        const winner = asked.findIndex((k) => parseRunBody(variant(k), bounds).fingerprint === record!.fingerprint);
        expect(winner, `round ${round}: the record is of one of the two rows`).toBeGreaterThanOrEqual(0);
        outcomes.forEach((o, i) => {
          const mine = asked[i] === asked[winner];
          if (mine && o.status !== 'fulfilled') failures.push(`round ${round}: request ${i} of the winning row refused: ${String((o as PromiseRejectedResult).reason)}`);
          if (!mine && o.status === 'fulfilled') failures.push(`round ${round}: request ${i} of the other ${round % 2 === 0 ? 'weight version' : 'row'} attached to the rollout instead of a 409`);
          if (!mine && o.status === 'rejected' && !(o.reason instanceof RequestRefused && o.reason.status === 409)) failures.push(`round ${round}: request ${i} failed with ${String(o.reason)} instead of a 409`);
        });
        expect(outcomes.filter((o) => o.status === 'fulfilled' && o.value.created).length, `round ${round}: one request created the rollout`).toBe(1);
      }
      expect(failures).toEqual([]);
      expect(await queue.count()).toBe(ROUNDS);
    } finally {
      await queue.close();
    }
  });
});
