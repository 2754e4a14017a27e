/**
 * A Cluster client given one seed learns the other nodes (cluster-seeds.ts): when that seed dies, a
 * new connection made from it (BullMQ's blocking `duplicate()`, a full reconnect) still reaches the
 * Cluster through the nodes it learned. A real 6-node Cluster of the test's own (redis-ha.ts).
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { createRedis, resolveRedisEndpoint, type Redis } from '../../../src/shared/redis/connect.ts';
import { knownClusterNodes, singleSeedWarning } from '../../../src/shared/redis/cluster-seeds.ts';
import type { Cluster } from 'ioredis';
import { startCluster, stopAllRedisHa } from '../../helpers/redis-ha.ts';
import { waitFor } from '../../helpers/wait.ts';

describe('a Redis Cluster client with one seed', () => {
  const opened: Redis[] = [];
  afterEach(async () => {
    for (const r of opened.splice(0)) r.disconnect();
    await stopAllRedisHa();
  });

  it('learns every node, and a connection made after the seed died reaches the promoted replica', async () => {
    const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    const key = `{vcft-${randomBytes(3).toString('hex')}}:probe`;
    const owner = await cluster.ownerOf(key);
    const seed = `${owner.primary.host}:${owner.primary.port}`;
    const endpoint = resolveRedisEndpoint({ redis_url: `redis://${seed}`, redis: { sentinels: [], sentinel_name: null, sentinel_password: null, cluster: true, cluster_nodes: [] } });
    expect(endpoint.kind === 'cluster' && endpoint.nodes).toEqual([owner.primary]);
    expect(singleSeedWarning(endpoint.kind === 'cluster' ? endpoint.nodes : [])).toMatch(/only one Redis Cluster node is named \(127\.0\.0\.1:\d+\).*redis\.cluster_nodes/);

    const redis = createRedis(endpoint, 'worker');
    opened.push(redis);
    await redis.set(key, 'before');
    await redis.call('WAIT', 1, 2000); // the replica has it before its primary dies
    // Replicas show in CLUSTER SLOTS once synced: a worker's client refreshes every 5 s and learns them.
    const all = cluster.startupNodes.map((n) => n.port).sort();
    await waitFor('the client to know every node', () => knownClusterNodes(redis as unknown as Cluster).length === all.length, 20_000, 200);
    expect(knownClusterNodes(redis as unknown as Cluster).map((n) => n.port).sort()).toEqual(all);

    await cluster.kill(owner.primary.port);
    const next = await cluster.waitForTakeover(owner.primary.port);
    expect(owner.replicas.map((r) => r.port)).toContain(next.port);

    // What BullMQ does for its blocking connection, and what a full reconnect does: start from the list.
    const dup = (redis as unknown as Cluster).duplicate() as unknown as Redis;
    opened.push(dup);
    expect(await dup.get(key)).toBe('before');
    await dup.set(key, 'after');
    expect(await redis.get(key)).toBe('after');
  });

  it('says nothing when several nodes are named', () => {
    expect(singleSeedWarning([{ host: 'a', port: 1 }, { host: 'b', port: 2 }])).toBeNull();
  });
});
