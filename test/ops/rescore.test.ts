/**
 * A run graded by the first scoring rules (the last `\boxed{}` only; unboxed text scored 0 without a
 * judge call) re-scored by today's, as docs/data-and-scoring.md says: `vcfleet rejudge --run-id ID --rescore`, as
 * its own process, from the response text the run kept. The old run is made as the old code left it:
 * its kept outcomes without `scoring_rules`, its rows of the old grading, its JSONL file.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { runAll } from '../../src/all-in-one/run-all.ts';
import { createScriptedAgent } from '../../src/agent/scripted-agent.ts';
import { RowSchema, type Row } from '../../src/shared/records/rows.ts';
import { RunStore } from '../../src/shared/stores/run-store.ts';
import { metricsPathFor } from '../../src/shared/output/metrics.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { makeFleetEnv, REDIS_URL, runCli, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

const quiet = { update() {}, stop() {} };
const readRows = (file: string): Row[] => readFileSync(file, 'utf8').trim().split('\n').map((l) => RowSchema.parse(JSON.parse(l)));

/** A row and outcome as the first rules stored them: no `scoring_rules`, `string_match_reward` or `failure_reason`. */
function asFirstRules<T extends object>(value: T, change: Record<string, unknown>): Record<string, unknown> {
  const old: Record<string, unknown> = { ...value, ...change };
  for (const key of ['scoring_rules', 'string_match_reward', 'failure_reason']) delete old[key];
  return old;
}

describe('vcfleet rejudge --rescore: an old run graded again by today\'s rules', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  afterAll(async () => {
    await env?.cleanup();
    removeTmpDirs();
  });

  it('the unboxed answer the first rules scored 0 without a judge call becomes a judged 1; boxed rows are graded again; the file and metrics follow', async () => {
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url });
    const [t0, t1, t2] = env.fixture.expected;
    const agent = createScriptedAgent({
      [t0.task_id]: { text: `Looking at the picture, it fits.\nAnswer: ${t0.gold}` },
      [t1.task_id]: { answer: '@gold' },
      [t2.task_id]: { answer: 'definitely wrong' },
    });
    const config = env.config(['++run_id=old1']);
    expect((await runAll({ config, logger: env.logger, agent, progress: quiet })).status).toBe('complete');

    // Age the run: what the first rules made of it (t0 had no box: no_answer, 0, no judge call).
    const redis = new Redis(REDIS_URL);
    const store = new RunStore(redis, env.prefix);
    const oldRows: Array<Record<string, unknown>> = [];
    for (const row of readRows(env.output)) {
      const unboxed = row.task_id === t0.task_id;
      const outcome = (await store.getOutcome('old1', row.rollout_id))!;
      const oldOutcome = asFirstRules(outcome, unboxed ? { stop_reason: 'no_answer', extracted_answer: null } : {});
      await redis.hset(`${env.prefix}:run:old1:outcomes`, row.rollout_id, JSON.stringify(oldOutcome));
      const oldRow = asFirstRules(row, unboxed ? { stop_reason: 'no_answer', extracted_answer: null, reward: 0, judge_verdict: null, judge_reason: null, judge_model: null } : {});
      await redis.hset(`${env.prefix}:run:old1:rows`, row.rollout_id, JSON.stringify(oldRow));
      oldRows.push(oldRow);
    }
    expect((await store.getOutcome('old1', `old1-${t0.task_id}-0`))).toMatchObject({ scoring_rules: 1, stop_reason: 'no_answer' });
    redis.disconnect();
    writeFileSync(env.output, oldRows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    // An old file still parses: the derived fields are filled from the row.
    const before = readRows(env.output);
    expect(before.find((r) => r.task_id === t0.task_id)).toMatchObject({ reward: 0, scoring_rules: 1, failure_reason: 'no_response', string_match_reward: 0 });

    const result = await runCli(['rejudge', '--run-id', 'old1', '--rescore', ...env.overrides]);
    expect(result.code, result.output).toBe(0);
    expect(result.stdout).toContain('sent 3 row(s) (0 judge_failed, 3 graded by older scoring rules) of run old1 back to the judge');
    const after = readRows(env.output);
    expect(after).toHaveLength(3);
    expect(after.every((r) => r.scoring_rules === 2)).toBe(true);
    expect(after.find((r) => r.task_id === t0.task_id)).toMatchObject({
      stop_reason: 'answered', extracted_answer: t0.gold, reward: 1, judge_verdict: 'equivalent', string_match_reward: 1, failure_reason: null,
    });
    expect(after.find((r) => r.task_id === t1.task_id)).toMatchObject({ reward: 1, failure_reason: null });
    expect(after.find((r) => r.task_id === t2.task_id)).toMatchObject({ reward: 0, judge_verdict: 'different', failure_reason: 'incorrect_answer' });
    // (The judge's verdict cache answers the prompts it saw when the run was first made.)
    const metrics = JSON.parse(readFileSync(metricsPathFor(env.output), 'utf8'));
    expect(metrics['mean/reward']).toBeCloseTo(2 / 3, 5);

    // A second rescore finds nothing of older rules: no row is graded again.
    const again = await runCli(['rejudge', '--run-id', 'old1', '--rescore', ...env.overrides]);
    expect(again.code, again.output).toBe(0);
    expect(again.stdout).toContain('sent 0 row(s) (0 judge_failed, 0 graded by older scoring rules)');
    expect(readRows(env.output).map((r) => [r.rollout_id, r.finished_at])).toEqual(after.map((r) => [r.rollout_id, r.finished_at]));
  }, 120_000);
});
