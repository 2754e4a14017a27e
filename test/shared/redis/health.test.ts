/**
 * A connection that comes back runs its `onBack` listeners (the results consumer's reconcile) once
 * it stayed back `settleMs`: a failover that comes back connection by connection, or flaps while a
 * Cluster settles, reconciles once, with one "lost" and one "is back" line.
 */
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/shared/logger.ts';
import { RedisHealth } from '../../../src/shared/redis/health.ts';

function logged() {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({ write(chunk, _enc, done) { for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l)); done(); } });
  return { lines, logger: createLogger({ level: 'info', destination, json: true }) };
}

describe('a reconnection is reported once', () => {
  it('losses while it settles are the same reconnection: one reconcile, one line each way', async () => {
    const { lines, logger } = logged();
    const health = new RedisHealth({ logger, display: 'cluster a:1,b:2', settleMs: 300 });
    let backs = 0;
    health.onBack(() => backs++);
    health.failed(new Error('a cluster node is gone; following the cluster'));
    health.ready();
    health.failed(new Error('connect ECONNREFUSED 127.0.0.1:7000'));
    health.ready();
    health.failed(new Error('Failed to refresh slots cache.'));
    health.ready();
    expect(backs).toBe(0);
    await sleep(600);
    expect(backs).toBe(1);
    expect(health.recoveries).toBe(1);
    expect(lines.map((l) => l.msg)).toEqual([
      'lost the connection to Redis at cluster a:1,b:2; retrying (one line when it is back)',
      'Redis at cluster a:1,b:2 is back',
    ]);
    // A later loss, once settled, is a new reconnection.
    health.failed(new Error('connect ECONNREFUSED 127.0.0.1:7000'));
    health.ready();
    await sleep(600);
    expect(backs).toBe(2);
    expect(health.recoveries).toBe(2);
    health.close();
  });

  it('a connection closed on purpose while it settles reconciles nothing', async () => {
    const { logger } = logged();
    const health = new RedisHealth({ logger, display: 'redis://h:6379', settleMs: 200 });
    let backs = 0;
    health.onBack(() => backs++);
    health.failed(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    health.ready();
    health.close();
    await sleep(400);
    expect(backs).toBe(0);
  });
});
