/**
 * The arithmetic of benchmark 15 (bench/lib/sizing-stats.ts): INFO counters read from a real Redis,
 * their rates over a window, and the knee: the first step where rows written per second stop following
 * the rollouts in flight, or the results lag grows.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { countersOf, findKnee, topCommands, kneeReason, lognormalMean, lognormalMedian, nodeRates, sizingTable, type SizingStep } from '../../bench/lib/sizing-stats.ts';

function step(target: number, rowsPerS: number, lagP95Ms: number, meanS = 60, hostBusy = 0.5): SizingStep {
  return {
    target, inFlight: target, pods: target / 8, windowS: 60, rowsPerS, expectedRowsPerS: target / meanS, lagP50Ms: lagP95Ms / 2, lagP95Ms,
    nodes: [{ name: ':7001', cpu: target / 20000, commandsPerS: target * 3 }, { name: ':7002', cpu: 0.01, commandsPerS: 5 }],
    memoryPerRolloutB: 3000, clients: target / 4, topCommands: '', hostBusy, hostCores: 2, renewCallsPerS: target / 8 / 7.5, locksRenewedPerS: target / 15,
  };
}

describe('INFO counters', () => {
  const redis = new Redis('redis://127.0.0.1:6379', { lazyConnect: true });
  afterAll(() => redis.disconnect());

  it('reads CPU, commands, memory and clients from a real INFO, and they move as Redis works', async () => {
    await redis.connect();
    const before = countersOf(await redis.info('all'));
    expect(before.usedMemory).toBeGreaterThan(0);
    expect(before.clients).toBeGreaterThanOrEqual(1);
    for (let i = 0; i < 200; i++) await redis.ping();
    const after = countersOf(await redis.info('all'));
    // This connection's 200 PINGs and the INFO are counted (others may add more on a shared Redis).
    expect(after.commands - before.commands).toBeGreaterThanOrEqual(201);
    expect(after.cpuS).toBeGreaterThanOrEqual(before.cpuS);
    expect(after.commandStats.ping.calls - (before.commandStats.ping?.calls ?? 0)).toBeGreaterThanOrEqual(200);
  });

  it('names the commands that took most of Redis time, in ms per second', () => {
    const at = (cpuS: number, stats: string) => countersOf(`${INFO.replace('used_cpu_user:2', `used_cpu_user:${cpuS}`)}${stats}`);
    const before = at(2, 'cmdstat_evalsha:calls=100,usec=1000,usec_per_call=10.00\ncmdstat_hset:calls=10,usec=50,usec_per_call=5.00\n');
    const after = at(3, 'cmdstat_evalsha:calls=1100,usec=601000,usec_per_call=10.00\ncmdstat_hset:calls=210,usec=100050,usec_per_call=5.00\ncmdstat_ping:calls=5,usec=5\n');
    expect(topCommands(before, after, 2, 2)).toBe('evalsha 300.0 ms/s (500/s), hset 50.0 ms/s (100/s)');
  });

  it('names the field an INFO lacks', () => {
    expect(() => countersOf('# CPU\r\nused_cpu_sys:1.5\r\n')).toThrow(/used_cpu_user/);
  });

  it('turns two readings into a share of one core and commands per second', () => {
    const r = nodeRates({ cpuS: 10, commands: 1000, usedMemory: 0, clients: 1, commandStats: {} }, { cpuS: 13, commands: 7000, usedMemory: 0, clients: 1, commandStats: {} }, 6);
    expect(r.cpu).toBeCloseTo(0.5);
    expect(r.commandsPerS).toBeCloseTo(1000);
    expect(() => nodeRates(countersOf(INFO), countersOf(INFO), 0)).toThrow(/window/);
  });
});

const INFO = 'used_cpu_sys:1\nused_cpu_user:2\ntotal_commands_processed:3\nused_memory:4\nconnected_clients:5\n';

describe('the knee', () => {
  it('is none while rows/s follows the rollouts in flight and the lag stays flat', () => {
    expect(findKnee([step(1000, 16.5, 300), step(4000, 66, 350), step(10000, 160, 500)])).toBeNull();
  });

  it('is the first step whose rows/s falls below 90% of in flight / mean duration', () => {
    const knee = findKnee([step(1000, 16.5, 300), step(4000, 55, 320), step(10000, 60, 5000)]);
    expect(knee).toMatchObject({ index: 1, target: 4000, hostBound: false });
    expect(knee!.reason).toMatch(/rows\/s 55\.0 is 83% of the 66\.7/);
    expect(knee!.reason).not.toMatch(/host/);
  });

  it("says when the host's cores were all busy at the knee (it may be the host's, not Redis's)", () => {
    const knee = findKnee([step(1000, 16.5, 300), step(4000, 55, 320, 60, 1.9)]);
    expect(knee).toMatchObject({ index: 1, hostBound: true });
    expect(knee!.reason).toMatch(/busy on 1\.90 of its 2 cores there, so this may be the host's knee/);
  });

  it('is the first step whose lag p95 doubles past the floor, though rows/s keeps up', () => {
    const steps = [step(1000, 16.6, 800), step(4000, 66, 1500), step(10000, 166, 2400)];
    const knee = findKnee(steps);
    expect(knee).toMatchObject({ index: 2, target: 10000 });
    expect(knee!.reason).toMatch(/lag p95 2,400 ms, above 1,600 ms/);
  });

  it('never calls a small lag a knee, however it grows (timer and poll noise)', () => {
    expect(kneeReason(step(4000, 66, 900), step(1000, 16.6, 100))).toBeNull();
  });

  it('counts a step that wrote no row as past the knee', () => {
    expect(findKnee([step(1000, 0, Number.NaN)])).toMatchObject({ index: 0 });
  });
});

describe('figures of the table', () => {
  it('takes a lognormal mean to its median and back', () => {
    expect(lognormalMean(lognormalMedian(60, 0.6), 0.6)).toBeCloseTo(60);
    expect(lognormalMedian(60, 0.6)).toBeCloseTo(60 / Math.exp(0.18));
  });

  it('gives each step a row with the busiest node and the sum over nodes', () => {
    const table = sizingTable([step(10000, 160, 500)]);
    expect(table.split('\n')).toHaveLength(3);
    expect(table).toContain('| 10,000 / 10,000 | 1,250 | 160.0 (166.7) | 250 / 500 ms | 50%; 51% | 30,005 | 3,000 B | 166.7 / 667 | 2,500 | 0.50 of 2 cores |');
  });
});
