/**
 * Roles die with SIGKILL (no shutdown hook runs) in the middle of their work, and the same run is
 * started twice at once. Every role is its own `vcfleet` OS process against the session's Redis,
 * with the scripted agent and the real judge client against the scripted judge server.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { runCli, startCli, waitFor, type CliProcess } from '../helpers/fleet.ts';
import { countLines, descendants, expectedRewards, expectOneRowEach, expectRewards, readJsonl, stillAlive } from './fault-helpers.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { faultFleet } from './fault-fleet.ts';

describe('SIGKILLed roles and a run started twice', () => {
  const f = faultFleet();

  async function stopAll(list: CliProcess[]): Promise<void> {
    for (const p of list) p.child.kill('SIGTERM');
    const codes = await Promise.all(list.map((p) => p.exited));
    expect(codes).toEqual(list.map(() => 0));
  }

  it('judge-worker SIGKILLed during judge calls: the stalled judge jobs run again, one row each', async () => {
    const script = { '*': { answer: '@gold' }, 'bv-002': { answer: 'Z' }, 'bv-003': { answer: null } };
    const env = await f.env({ rows: 6, script });
    // Each judge call takes 1.5 s, so the kill lands while calls are in flight.
    f.judge.setScript(async () => {
      await sleep(1500);
      return 'grade' as const;
    });
    const args = env.overrides;
    expect((await runCli(['produce', '--run-id', 'kj', ...args])).code).toBe(0);
    const victim = startCli(['worker', 'judge', ...args]);
    f.procs.push(victim, startCli(['worker', 'sandbox', ...args]), startCli(['worker', 'results', ...args]));
    await waitFor('a judge call in flight', () => f.judge.requests.length > 0, 60_000, 50);
    victim.child.kill('SIGKILL');
    await victim.exited;
    const rescuer = startCli(['worker', 'judge', ...args]);
    f.procs.push(rescuer);
    await waitFor('6 rows', () => countLines(env!.output) >= 6, 90_000, 250);
    const rows = readJsonl(env.output);
    expectOneRowEach(rows, 'kj', env.fixture);
    expectRewards(rows, expectedRewards(env.fixture, script));
    expect(rows.every((r) => r.failure_kind === null)).toBe(true);
    await stopAll(f.procs.slice(1));
  });

  it('results consumer SIGKILLed mid-stream, then a torn line: restarted, the file is reconciled', async () => {
    const script = { '*': { answer: '@gold' }, 'bv-004': { answer: 'wrong' } };
    const env = await f.env({ rows: 20, script,
      overrides: ['++num_repeats=10', '++judge.rate_limit_per_s=1000', '++judge.concurrency=16', '++queues.rollout_concurrency=8'],
    });
    const args = env.overrides;
    expect((await runCli(['produce', '--run-id', 'kr', ...args])).code).toBe(0);
    const upstream = [startCli(['worker', 'sandbox', ...args]), startCli(['worker', 'judge', ...args])];
    f.procs.push(...upstream);
    // All 200 rows wait in the results queue; then the consumer starts and dies mid-stream.
    const results = openQueue('results', f.redis, env.prefix);
    await waitFor('200 results jobs', async () => (await results.getWaitingCount()) >= 200, 120_000, 250);
    await results.close();
    const victim = startCli(['worker', 'results', ...args]);
    f.procs.push(victim);
    await waitFor('some rows written', () => countLines(env!.output) >= 20, 60_000, 5);
    victim.child.kill('SIGKILL');
    await victim.exited;
    const before = countLines(env.output);
    expect(before).toBeLessThan(200);
    // What a crash in the middle of a write leaves: half a line.
    appendFileSync(env.output, '{"row_version":1,"run_id":"kr","rollout_id":"kr-bv-0');
    const restarted = startCli(['worker', 'results', ...args]);
    f.procs.push(restarted);
    await waitFor('200 rows', () => readFileSync(env!.output, 'utf8').endsWith('\n') && countLines(env!.output) >= 200, 120_000, 250);
    const rows = readJsonl(env.output);
    expectOneRowEach(rows, 'kr', env.fixture, 10);
    expectRewards(rows, expectedRewards(env.fixture, script));
    expect(await f.redis.hlen(`${env.prefix}:run:kr:rows`)).toBe(200);
    console.log(`[fault] results consumer killed after ${before}/200 rows; torn line dropped, 200 rows after restart`);
    await stopAll([...upstream, restarted]);
  });

  it('the same run started twice at once: one row per rollout, the second consumer waits for the lock', async () => {
    const script = { '*': { answer: '@gold', delay_ms: 300 }, 'bv-005': { answer: 'nope', delay_ms: 300 } };
    const env = await f.env({ rows: 8, script });
    const args = ['run', '--run-id', 'twice', ...env.overrides];
    const a = startCli(args);
    const b = startCli(args);
    f.procs.push(a, b);
    const codes = await Promise.all([a.exited, b.exited]);
    expect(codes, `${a.output().slice(-2000)}\n----\n${b.output().slice(-2000)}`).toEqual([0, 0]);
    const rows = readJsonl(env.output);
    expectOneRowEach(rows, 'twice', env.fixture);
    expectRewards(rows, expectedRewards(env.fixture, script));
    expect(a.output() + b.output()).toContain('another results consumer is writing');
    for (const p of [a, b]) expect(stillAlive(descendants(p.child.pid!))).toEqual([]);
  });
});
