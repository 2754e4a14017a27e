/**
 * Worker connections under a Sentinel failover, on a real set (a primary, a replica, three
 * sentinels on free loopback ports): a frozen primary (SIGSTOP, so no connection ever breaks) is
 * left at once for the promoted replica, BullMQ-style duplicates included; a killed primary, with
 * many connections reconnecting while the sentinels announce the switch, ends none of them (ioredis's
 * own detector ended them one time in three: the fault suite's Sentinel run stalled).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createRedis, resolveRedisEndpoint, type Redis } from '../../../src/shared/redis/connect.ts';
import { switchesSeen } from '../../../src/shared/redis/sentinel-switch.ts';
import { startSentinelSet, stopAllRedisHa, type SentinelSet } from '../../helpers/redis-ha.ts';

const NO_HA = { sentinels: [], sentinel_name: null, sentinel_password: null, cluster: false, cluster_nodes: [] };

/** A SET that answers within `ms`, or why not. */
async function tryWrite(redis: Redis, ms: number): Promise<string> {
  const write = redis.set(`vcft-switch-${Math.random()}`, '1', 'EX', 60).then(() => 'ok', (err: Error) => err.message);
  return Promise.race([write, new Promise<string>((resolve) => setTimeout(() => resolve('no answer'), ms))]);
}

describe('Sentinel failover: worker connections follow the new primary', () => {
  let conns: Redis[] = [];
  let set: SentinelSet | undefined;
  afterEach(async () => {
    for (const c of conns) c.disconnect();
    conns = [];
    set = undefined;
    await stopAllRedisHa();
  });

  function endpointOf(s: SentinelSet) {
    const endpoint = resolveRedisEndpoint({ redis_url: s.url, redis: { ...NO_HA, sentinel_password: s.sentinelPassword ?? null } });
    if (endpoint.kind !== 'sentinel') throw new Error(`${s.url} is not a Sentinel URL`);
    return endpoint;
  }

  it('a frozen primary: connections and their duplicates move to the promoted replica at the switch', async () => {
    set = await startSentinelSet({ replicas: 1, sentinels: 3, password: 'pw-switch-1', sentinelPassword: 'pw-switch-2' });
    const endpoint = endpointOf(set);
    const base = createRedis(endpoint, 'worker');
    conns = [base, base.duplicate(), base.duplicate(), createRedis(endpoint, 'worker')];
    for (const c of conns) expect(await tryWrite(c, 5000)).toBe('ok');
    await set.kill(set.primary.port, 'SIGSTOP');
    const promoted = await set.waitForFailover();
    expect(promoted.port).toBe(set.replicas[0].port);
    // The old primary is still frozen: nothing but the switch announcement can move them.
    const answers = await Promise.all(conns.map((c) => tryWrite(c, 15_000)));
    expect(answers).toEqual(conns.map(() => 'ok'));
    expect(switchesSeen(endpoint)).toBeGreaterThanOrEqual(1);
    for (const c of conns) expect(c.status).toBe('ready');
  }, 90_000);

  it('a killed primary with many connections reconnecting at the switch: none gives up', async () => {
    set = await startSentinelSet({ replicas: 1, sentinels: 3 });
    const endpoint = endpointOf(set);
    conns = Array.from({ length: 12 }, () => createRedis(endpoint, 'worker'));
    for (const c of conns) expect(await tryWrite(c, 5000)).toBe('ok');
    await set.kill(set.primary.port);
    await set.waitForFailover();
    const answers = await Promise.all(conns.map((c) => tryWrite(c, 15_000)));
    expect(answers).toEqual(conns.map(() => 'ok'));
    expect(conns.map((c) => c.status)).toEqual(conns.map(() => 'ready'));
  }, 90_000);
});
