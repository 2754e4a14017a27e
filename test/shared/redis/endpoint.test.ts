/**
 * Which Redis the config names (one server, a Sentinel-watched primary, a Cluster), in the URL forms
 * and the `redis.*` settings; passwords masked in every form; the answers Redis will repeat named with
 * their fix; and what a role logs while its Redis is away: one line per change of state, read from the
 * JSON lines the logger writes.
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/shared/config/load.ts';
import { createLogger } from '../../../src/shared/logger.ts';
import { redactUrl, resolveRedisEndpoint } from '../../../src/shared/redis/endpoint.ts';
import { fatalRedisFix, RedisHealth } from '../../../src/shared/redis/health.ts';

const config = (overrides: string[], env: NodeJS.ProcessEnv = {}) => loadConfig({ overrides, env });

describe('the Redis endpoint of a config', () => {
  it('a plain URL is one server', () => {
    expect(resolveRedisEndpoint(config(['++redis_url=redis://:pw@10.0.0.5:6379/2']))).toMatchObject({ kind: 'single', url: 'redis://:pw@10.0.0.5:6379/2', password: 'pw', display: 'redis://:***@10.0.0.5:6379/2' });
  });

  it('redis+sentinel:// names the sentinels, the master group, the passwords and the db', () => {
    const e = resolveRedisEndpoint(config(['++redis_url=redis+sentinel://:data%40pw@10.0.0.1:26379,[::1]:26380/mymaster?sentinel_password=sp&db=3']));
    expect(e).toMatchObject({
      kind: 'sentinel', name: 'mymaster', db: 3, password: 'data@pw', sentinelPassword: 'sp',
      sentinels: [{ host: '10.0.0.1', port: 26379 }, { host: '::1', port: 26380 }],
    });
    expect(e.display).toBe('redis+sentinel://:***@10.0.0.1:26379,[::1]:26380/mymaster?sentinel_password=***&db=3');
  });

  it('the redis.* settings and REDIS_SENTINEL_PASSWORD make the same Sentinel endpoint', () => {
    const c = config(['++redis.sentinels=["s1:26379","s2:26379","s3:26379"]', '++redis.sentinel_name=fleet', '++redis_url=redis://:pw@ignored:6379'], { REDIS_SENTINEL_PASSWORD: 'sentinel-secret' });
    expect(c.redis.sentinel_password).toBe('sentinel-secret');
    expect(resolveRedisEndpoint(c)).toMatchObject({ kind: 'sentinel', name: 'fleet', password: 'pw', sentinelPassword: 'sentinel-secret', sentinels: [{ host: 's1', port: 26379 }, { host: 's2', port: 26379 }, { host: 's3', port: 26379 }] });
  });

  it('a Cluster from redis+cluster:// or from redis.cluster with the URL\'s host as one seed', () => {
    expect(resolveRedisEndpoint(config(['++redis_url=redis+cluster://:pw@n1:7000,n2:7001']))).toMatchObject({ kind: 'cluster', password: 'pw', nodes: [{ host: 'n1', port: 7000 }, { host: 'n2', port: 7001 }], display: 'redis+cluster://:***@n1:7000,n2:7001' });
    expect(resolveRedisEndpoint(config(['++redis.cluster=true', '++redis_url=redis://n0:7000', '++redis.cluster_nodes=["n1:7001","n0:7000"]']))).toMatchObject({ kind: 'cluster', nodes: [{ host: 'n0', port: 7000 }, { host: 'n1', port: 7001 }] });
  });

  it('an incomplete or contradictory setting fails naming the key and the fix', () => {
    expect(() => resolveRedisEndpoint(config(['++redis.sentinels=["s1:26379"]']))).toThrow(/redis\.sentinel_name is not: set it to the master group name/);
    expect(() => resolveRedisEndpoint(config(['++redis_url=redis+sentinel://s1:26379']))).toThrow(/names no master group: add it as the path/);
    expect(() => resolveRedisEndpoint(config(['++redis_url=redis+sentinel://s1:notaport/m']))).toThrow(/"s1:notaport" is not host:port/);
    expect(() => resolveRedisEndpoint(config(['++redis.cluster=true', '++redis.sentinels=["s1:26379"]', '++redis.sentinel_name=m']))).toThrow(/either a Cluster or watched by sentinels/);
    expect(() => config(['++redis.cluster_nodes=["n1"]'])).toThrow(/redis\.cluster_nodes/);
  });

  it('a hash-tagged prefix is a valid queues.prefix', () => {
    expect(config(['++queues.prefix={vcfleet}']).queues.prefix).toBe('{vcfleet}');
    expect(() => config(['++queues.prefix={a}{b}'])).toThrow(/queues\.prefix/);
  });

  it('redaction masks the password of every form, and the sentinel password is a secret of the logger', () => {
    expect(redactUrl('redis://user:p%40ss@h:6379/0')).toBe('redis://user:***@h:6379/0');
    expect(redactUrl('rediss+sentinel://:pw@h1:1,h2:2/m?password=x&sentinel_password=y')).toBe('rediss+sentinel://:***@h1:1,h2:2/m?password=***&sentinel_password=***');
    expect(redactUrl('redis://h:6379')).toBe('redis://h:6379');
  });
});

describe('answers Redis will repeat', () => {
  it('MOVED, CROSSSLOT and NOAUTH name their fix; a refused connection is not fatal', () => {
    expect(fatalRedisFix('MOVED 8248 127.0.0.1:7001')).toMatch(/set redis\.cluster=true .*hash tag/);
    expect(fatalRedisFix("CROSSSLOT Keys in request don't hash to the same slot")).toMatch(/VCFLEET_PREFIX=\{vcfleet\}/);
    expect(fatalRedisFix('NOAUTH Authentication required.')).toMatch(/Redis wants a password/);
    expect(fatalRedisFix('connect ECONNREFUSED 127.0.0.1:6379')).toBeNull();
    expect(fatalRedisFix('READONLY You can\'t write against a read only replica.')).toBeNull();
  });
});

describe('what a role logs while Redis is away', () => {
  function logged() {
    const lines: Array<Record<string, unknown>> = [];
    const destination = new Writable({ write(chunk, _enc, done) { for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l)); done(); } });
    return { lines, logger: createLogger({ level: 'info', destination, json: true }) };
  }

  it('one line when lost and one when back, however many retries fail in between', () => {
    const { lines, logger } = logged();
    const health = new RedisHealth({ logger, display: 'redis://h:6379' });
    let backs = 0;
    health.onBack(() => backs++);
    for (let i = 0; i < 500; i++) health.failed(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    health.ready();
    health.ready();
    for (let i = 0; i < 50; i++) health.failed(new Error('All sentinels are unreachable. Retrying from scratch after 200ms.'));
    health.ready();
    expect(lines.map((l) => l.msg)).toEqual([
      'lost the connection to Redis at redis://h:6379; retrying (one line when it is back)',
      'Redis at redis://h:6379 is back',
      'lost the connection to Redis at redis://h:6379; retrying (one line when it is back)',
      'Redis at redis://h:6379 is back',
    ]);
    expect(backs).toBe(2);
    expect(health.recoveries).toBe(2);
  });

  it('an answer Redis will repeat is logged once with its fix and stops the role once', () => {
    const { lines, logger } = logged();
    const fatal: string[] = [];
    const health = new RedisHealth({ logger, display: 'redis://h:7000', onFatal: (m) => fatal.push(m) });
    for (let i = 0; i < 100; i++) health.failed(new Error('MOVED 8248 127.0.0.1:7001'));
    expect(fatal).toHaveLength(1);
    expect(fatal[0]).toMatch(/^Redis at redis:\/\/h:7000 answered "MOVED 8248 127\.0\.0\.1:7001": this is a Redis Cluster node: set redis\.cluster=true/);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50 });
  });
});
