/**
 * The nodes a Redis Cluster client starts from. ioredis asks its startup nodes again on every full
 * reconnect (and a `duplicate()`, such as BullMQ's blocking connection, starts from the same list),
 * so a client given one seed that then dies can never find the Cluster again, however many healthy
 * nodes it talked to meanwhile: it logs `Failed to refresh slots cache` for ever. Here every client
 * learns the nodes the Cluster reports (CLUSTER SLOTS, after each slots refresh) and reconnects
 * through any node it knows; its duplicates learn the same way.
 */
import type { Cluster } from 'ioredis';
import type { HostPort } from './endpoint.ts';

/** The parts of an ioredis Cluster this module reads and sets (`startupNodes` is not in its typings). */
interface LearningCluster {
  startupNodes: Array<HostPort | string | number>;
  nodes(role?: 'all' | 'master' | 'slave'): Array<{ options: { host?: string; port?: number } }>;
  on(event: 'refresh', fn: () => void): unknown;
  duplicate(...args: unknown[]): Cluster;
}

const key = (n: HostPort) => `${n.host}:${n.port}`;
const learning = new WeakSet<object>();

/** Every node the client knows: its startup list first (as given), then those learned since. */
export function knownClusterNodes(cluster: Cluster): HostPort[] {
  const c = cluster as unknown as LearningCluster;
  return (c.startupNodes ?? []).filter((n): n is HostPort => typeof n === 'object' && n !== null && 'port' in n);
}

/**
 * Keep `cluster`'s startup list the union of the nodes it was given and every node the Cluster has
 * reported since (none is ever dropped: a node down now may be the one that answers next). Also for
 * each `duplicate()` of it. Idempotent.
 */
export function learnClusterNodes(cluster: Cluster): Cluster {
  const c = cluster as unknown as LearningCluster;
  if (learning.has(c)) return cluster;
  learning.add(c);
  c.on('refresh', () => {
    const known = new Map(knownClusterNodes(cluster).map((n) => [key(n), n]));
    for (const node of c.nodes('all')) {
      const { host, port } = node.options;
      if (host && port && !known.has(`${host}:${port}`)) known.set(`${host}:${port}`, { host, port });
    }
    c.startupNodes = [...known.values()];
  });
  const duplicate = c.duplicate.bind(c);
  c.duplicate = (...args: unknown[]) => learnClusterNodes(duplicate(...args));
  return cluster;
}

/**
 * What a role says at start when the config names one Cluster node: the client learns the others
 * from it, but a role started (or restarted) while that node is down cannot reach the Cluster.
 */
export function singleSeedWarning(nodes: HostPort[]): string | null {
  if (nodes.length !== 1) return null;
  return `only one Redis Cluster node is named (${key(nodes[0])}): the roles learn the other nodes from it and follow a failover through them, ` +
    'but a role started or restarted while that node is down cannot find the Cluster; list every node in redis.cluster_nodes ' +
    `(e.g. ++redis.cluster_nodes=[${key(nodes[0])},host2:port,host3:port], or REDIS_URL=redis+cluster://${key(nodes[0])},host2:port,…)`;
}
