/**
 * `vcfleet serve`'s bounds on connections (real server, real sockets, real Redis behind it): sockets
 * that never send a request (silent, or trickling a header line every 5 s, as a slowloris does) are
 * closed within 60 s of opening, and past `serve.max_connections` new ones are closed at once, so a
 * flood cannot hold the process; once they are gone the service answers again.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/shared/config/load.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { createServiceRun } from '../../src/producer/produce.ts';
import { RolloutService } from '../../src/serve/rollout-service.ts';
import { startServeServer, type ServeServer } from '../../src/serve/server.ts';
import { REDIS_URL } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';

const prefix = `vcftest-serve-conns-${randomBytes(4).toString('hex')}`;
const logger = createLogger({ level: 'silent' });
const SILENT = 40;
const TRICKLING = 10;
const CAP = 45;
/** The bound: an idle unauthenticated socket is closed within a minute. */
const WITHIN_MS = 60_000;

describe('serve holds no connection that never sends a request', () => {
  let redis: Redis;
  let service: RolloutService | undefined;
  let server: ServeServer | undefined;
  const sockets: net.Socket[] = [];
  const timers: NodeJS.Timeout[] = [];
  beforeAll(() => {
    redis = createRedis(REDIS_URL, 'worker');
  });
  afterAll(async () => {
    for (const t of timers) clearInterval(t);
    for (const s of sockets) s.destroy();
    await server?.close();
    await service?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
    removeTmpDirs();
  });

  it(`${SILENT} silent and ${TRICKLING} trickling sockets are closed within 60 s; past serve.max_connections (${CAP}) at once`, async () => {
    const dir = createTmpDir('vcfleet-serve-conns-');
    const config = loadConfig({ overrides: [`++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`, '++run_id=conns', `++output_jsonl_fpath=${path.join(dir, 'conns.jsonl')}`, '++serve.port=0', `++serve.max_connections=${CAP}`], env: {} });
    const { run } = await createServiceRun({ config, redis, logger });
    service = new RolloutService({ config, redis, run, logger });
    server = await startServeServer({ config, logger, service });
    const opened = new Map<net.Socket, number>();
    const closedAfter = new Map<net.Socket, number>();
    const allClosed = new Promise<void>((resolve) => {
      const open = (trickle: boolean) => {
        const socket = net.connect(server!.port, '127.0.0.1');
        sockets.push(socket);
        opened.set(socket, Date.now());
        socket.on('error', () => undefined);
        // Read what comes (nothing, then the end): a socket nobody reads never sees the server close it.
        socket.resume();
        socket.once('close', () => {
          closedAfter.set(socket, Date.now() - opened.get(socket)!);
          if (closedAfter.size === SILENT + TRICKLING) resolve();
        });
        if (trickle) {
          socket.once('connect', () => socket.write('POST /run HTTP/1.1\r\nHost: 127.0.0.1\r\n'));
          timers.push(setInterval(() => socket.writable && socket.write(`X-Slow-${Date.now()}: 1\r\n`), 5000));
        }
      };
      for (let i = 0; i < SILENT; i++) open(false);
      for (let i = 0; i < TRICKLING; i++) open(true);
    });
    // Bounded by the minute and a margin: past it, say how many are still open and for how long.
    const bound = new Promise<'late'>((resolve) => timers.push(setTimeout(() => resolve('late'), WITHIN_MS + 15_000)));
    if ((await Promise.race([allClosed, bound])) === 'late') {
      const still = [...opened].filter(([s]) => !closedAfter.has(s)).map(([, at]) => Math.round((Date.now() - at) / 1000));
      throw new Error(`${still.length} of ${SILENT + TRICKLING} sockets still open, for ${still.join(', ')} s`);
    }
    const times = [...closedAfter.values()];
    expect(times.filter((ms) => ms > WITHIN_MS), `closed after (ms): ${times.join(', ')}`).toEqual([]);
    // The ones past the cap went at once, well before any timeout.
    expect(times.filter((ms) => ms < 5000).length, `closed after (ms): ${times.join(', ')}`).toBeGreaterThanOrEqual(SILENT + TRICKLING - CAP);
    const health = await fetch(`${server.url}health`);
    expect(health.status).toBe(200);
    await health.text();
  }, WITHIN_MS + 60_000);
});
