/**
 * Whether what listens at a plain `redis://` URL is a Redis server, asked once on a plain socket
 * before the client waits for it: PING must get a Redis reply (`+PONG`, or an error such as
 * `-NOAUTH` or `-DENIED`, which the client then reports with its fix). Something that answers
 * otherwise (an HTTP server on that port), closes without a word, or accepts and never answers is
 * named at once instead of after `redis.connect_timeout_s` of retries.
 */
import net from 'node:net';

export type RedisProbe =
  | { kind: 'redis' }
  /** Nothing accepted the connection (refused, unreachable, no route): the client's retries say which. */
  | { kind: 'unreachable' }
  | { kind: 'not_redis'; said: string }
  | { kind: 'closed' }
  | { kind: 'silent'; waitedMs: number };

/** Ask `url` (plain `redis:` only; anything else is reported as `redis`, left to the client) for PING, within `ms`. */
export async function probeRedis(url: string, ms: number): Promise<RedisProbe> {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return { kind: 'redis' };
  }
  if (target.protocol !== 'redis:') return { kind: 'redis' };
  const host = target.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  return new Promise((resolve) => {
    let said = '';
    let connected = false;
    const socket = net.connect(Number(target.port || 6379), host);
    const done = (result: RedisProbe) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => done(connected ? { kind: 'silent', waitedMs: ms } : { kind: 'unreachable' }), ms);
    socket.once('connect', () => {
      connected = true;
      socket.write('PING\r\n');
    });
    socket.on('data', (d) => {
      said += d.toString('latin1');
      if (/^[+-]/.test(said)) return done({ kind: 'redis' });
      if (said.includes('\n') || said.length >= 80) done({ kind: 'not_redis', said: said.split(/\r?\n/)[0].replace(/[^\x20-\x7e]/g, '?').slice(0, 60) });
    });
    socket.once('error', () => done(connected ? { kind: 'closed' } : { kind: 'unreachable' }));
    socket.once('close', () => done(said ? { kind: 'not_redis', said: said.replace(/[^\x20-\x7e]/g, '?').slice(0, 60) } : connected ? { kind: 'closed' } : { kind: 'unreachable' }));
  });
}
