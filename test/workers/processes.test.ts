/**
 * The fleet as a user on several hosts runs it: every role a separate `vcfleet` OS process against
 * one Redis. A sandbox-worker is killed with SIGKILL mid-task; another one recovers its rollout, and
 * every rollout still ends with exactly one row. Rows and metrics are checked field by field.
 */
import { existsSync, readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { RowSchema } from '../../src/shared/records/rows.ts';
import { metricsPathFor } from '../../src/shared/output/metrics.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { dumpPrefix } from '../helpers/redis-keys.ts';
import { FAKE_JUDGE_KEY, makeFleetEnv, REDIS_URL, runCli, startCli, waitFor, type CliProcess, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

describe('vcfleet roles as separate processes', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  const procs: CliProcess[] = [];
  afterAll(async () => {
    for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
    await env?.cleanup();
    removeTmpDirs();
  });

  it('survives a SIGKILLed sandbox-worker and writes one row per rollout', async () => {
    env = await makeFleetEnv({
      rows: 6,
      judgeUrl: judge.url,
      script: { '*': { answer: '@gold', delay_ms: 1500, turns: 2, tool_calls: 1, input_tokens: 50, output_tokens: 5 } },
      overrides: ['++queues.rollout_concurrency=1'],
    });
    const args = env.overrides;
    const produced = await runCli(['produce', '--run-id', 'multi', ...args]);
    expect(produced.code, produced.output).toBe(0);
    expect(produced.output).toContain('run multi: 6 rollouts, 6 enqueued now');
    const again = await runCli(['produce', '--run-id', 'multi', ...args]);
    expect(again.output).toContain('0 enqueued now');

    const victim = startCli(['worker', 'sandbox', ...args]);
    procs.push(victim);
    const redis = new Redis(REDIS_URL);
    const activeKey = `${env.prefix}:rollout:active`;
    const victimJob = await waitFor('a rollout to be active', async () => (await redis.lrange(activeKey, 0, -1))[0], 30_000, 50);
    victim.child.kill('SIGKILL');
    await victim.exited;

    procs.push(startCli(['worker', 'sandbox', ...args]), startCli(['worker', 'judge', ...args]), startCli(['worker', 'results', ...args]));
    const rows = await waitFor('6 rows', () => {
      if (!existsSync(env.output)) return undefined;
      const lines = readFileSync(env.output, 'utf8').trim().split('\n').filter(Boolean);
      return lines.length >= 6 ? lines.map((l) => RowSchema.parse(JSON.parse(l))) : undefined;
    }, 120_000, 250);
    // The rollout the victim held comes back after its lock expires; still one row each.
    expect(rows.map((r) => r.rollout_id).sort()).toEqual(env.fixture.expected.map((t) => `multi-${t.task_id}-0`).sort());
    expect(rows.some((r) => r.rollout_id === victimJob)).toBe(true);
    for (const row of rows) {
      const task = env.fixture.expected.find((t) => t.task_id === row.task_id)!;
      expect(row).toMatchObject({
        run_id: 'multi', repeat: 0, benchmark: 'babyvision_opencode', type: task.type, subtype: task.subtype,
        ans_type: task.ans_type, expected_answer: task.gold, extracted_answer: task.gold, reward: 1,
        judge_verdict: 'equivalent', stop_reason: 'answered', failure_kind: null, turns: 2, tool_calls: 1,
        input_tokens: 50, output_tokens: 5, policy_model: 'policy', judge_model: 'gpt-4o-mini',
      });
      expect(row.wall_s).toBeGreaterThanOrEqual(1.4);
    }
    const metrics = await waitFor('metrics for 6 rows', () => {
      const file = metricsPathFor(env.output);
      if (!existsSync(file)) return undefined;
      const m = JSON.parse(readFileSync(file, 'utf8'));
      return m.num_rollouts === 6 ? m : undefined;
    }, 10_000);
    expect(metrics).toMatchObject({ 'mean/reward': 1, 'strict/reward': 1, num_scored: 6, num_masked: 0, stop_reasons: { answered: 6 }, 'mean/turns': 2 });

    const status = await runCli(['status', '--run-id', 'multi', '--json', ...args]);
    expect(status.code, status.output).toBe(0);
    const s = JSON.parse(status.stdout);
    expect(s).toMatchObject({ rows: 6, scored: 6, correct: 6, complete: true });

    for (const p of procs.slice(1)) p.child.kill('SIGTERM');
    const codes = await Promise.all(procs.slice(1).map((p) => p.exited));
    expect(codes).toEqual([0, 0, 0]);
    for (const p of procs) expect(p.output()).not.toContain(FAKE_JUDGE_KEY);
    const dump = await dumpPrefix(REDIS_URL, env.prefix);
    expect(dump.keys).toBeGreaterThan(0);
    expect(dump.text).not.toContain(FAKE_JUDGE_KEY);
    redis.disconnect();
  });
});
