/**
 * The two Redis set-ups benchmark 15 sizes, each private to the run on free loopback ports and
 * persisting nothing: one redis-server, or a Redis Cluster of three primaries (no replicas: the load
 * of replication is not what is measured) made with `redis-cli --cluster create`. Both allow
 * `maxclients` connections (ten thousand rollouts in pods of a few slots are thousands of
 * connections); the figure Redis actually took (it lowers it to what `ulimit -n` allows) is reported.
 */
import { Redis } from 'ioredis';
import { startCluster } from '../../test/helpers/redis-ha.ts';
import { startBenchRedis } from './redis-server.ts';
import { countersOf, type RedisCounters } from './sizing-stats.ts';

export type Topology = 'single' | 'cluster';

export interface SizingRedis {
  topology: Topology;
  /** What the fleet's `redis_url` takes: `redis://…` or `redis+cluster://n1,n2,n3`. */
  url: string;
  /** The queue prefix: hash-tagged on a Cluster (every key of the fleet in one slot, as BullMQ needs). */
  prefix(name: string): string;
  /** Every data node's counters now, by name. */
  counters(): Promise<Array<{ name: string; counters: RedisCounters }>>;
  /** `maxclients` as each node took it (the lowest). */
  maxclients(): Promise<number>;
  /** The node that holds the fleet's keys (`prefix`'s slot), for the notes. */
  holder(prefix: string): Promise<string>;
  stop(): Promise<void>;
}

async function admin(host: string, port: number): Promise<Redis> {
  const r = new Redis({ host, port, maxRetriesPerRequest: 2, lazyConnect: true });
  r.on('error', () => {});
  await r.connect();
  return r;
}

export async function startSizingRedis(topology: Topology, maxclients: number): Promise<SizingRedis> {
  if (topology === 'single') {
    const server = await startBenchRedis(['--maxclients', String(maxclients)]);
    const a = await admin('127.0.0.1', server.port);
    return {
      topology, url: server.url,
      prefix: (name) => name,
      counters: async () => [{ name: `:${server.port}`, counters: countersOf(await a.info('all')) }],
      maxclients: async () => Number(((await a.config('GET', 'maxclients')) as string[])[1]),
      holder: async () => `:${server.port}`,
      async stop() {
        a.disconnect();
        await server.stop();
      },
    };
  }
  const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0, appendonly: false, dataConf: [`maxclients ${maxclients}`] });
  const admins = await Promise.all(cluster.nodes.map((n) => admin(n.host, n.port)));
  return {
    topology,
    url: `redis+cluster://${cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',')}`,
    prefix: (name) => `{${name}}`,
    counters: async () => Promise.all(cluster.nodes.map(async (n, i) => ({ name: `:${n.port}`, counters: countersOf(await admins[i].info('all')) }))),
    maxclients: async () => Math.min(...(await Promise.all(admins.map(async (a) => Number(((await a.config('GET', 'maxclients')) as string[])[1]))))),
    holder: async (prefix) => `:${(await cluster.ownerOf(`${prefix}:x`)).primary.port}`,
    async stop() {
      for (const a of admins) a.disconnect();
      await cluster.stop();
    },
  };
}
