/** Remove what a test or bench run wrote to a Redis it shares: every key of its own unique prefix. */
import { Redis } from 'ioredis';

export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.unlink(...keys);
  } while (cursor !== '0');
}

/** Every key of a prefix with its whole value (strings, hashes, lists, sets, zsets, streams) as text. */
export async function dumpPrefix(url: string, prefix: string): Promise<{ keys: number; text: string }> {
  const redis = new Redis(url);
  const parts: string[] = [];
  let keys = 0;
  try {
    let cursor = '0';
    do {
      const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      for (const key of batch) {
        keys++;
        const type = await redis.type(key);
        let value: unknown;
        if (type === 'string') value = (await redis.getBuffer(key))?.toString('latin1');
        else if (type === 'hash') value = await redis.hgetall(key);
        else if (type === 'list') value = await redis.lrange(key, 0, -1);
        else if (type === 'set') value = await redis.smembers(key);
        else if (type === 'zset') value = await redis.zrange(key, 0, -1, 'WITHSCORES');
        else if (type === 'stream') value = await redis.xrange(key, '-', '+');
        parts.push(`${key} ${type} ${JSON.stringify(value)}`);
      }
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return { keys, text: parts.join('\n') };
}
