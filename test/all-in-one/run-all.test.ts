/**
 * The whole fleet in one process (`runAll`) on the session's Redis, with a scripted agent and the
 * real judge client against a scripted judge server: rows and metrics field by field, masked rows
 * for judge and infrastructure failures, rejudge and retry turning them into scores, duplicates.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { runAll } from '../../src/all-in-one/run-all.ts';
import { createScriptedAgent } from '../../src/agent/scripted-agent.ts';
import { rejudge, retryFailed } from '../../src/ops/requeue.ts';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { RowSchema, type Row } from '../../src/shared/records/rows.ts';
import { metricsPathFor } from '../../src/shared/output/metrics.ts';
import { configHash } from '../../src/shared/output/run-identity.ts';
import { RunStore } from '../../src/shared/stores/run-store.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { FAKE_JUDGE_KEY, makeFleetEnv, REDIS_URL, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

const quiet = { update() {}, stop() {} };

function readRows(file: string): Row[] {
  return readFileSync(file, 'utf8').trim().split('\n').map((l) => RowSchema.parse(JSON.parse(l)));
}

describe('vcfleet run (in-process fleet)', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  afterEach(async () => {
    await env?.cleanup();
    removeTmpDirs();
  });

  it('writes one row per rollout with every field, and metrics by hand', async () => {
    judge.setScript([]); // default grading for every request
    judge.requests.length = 0;
    env = await makeFleetEnv({ rows: 6, judgeUrl: judge.url, overrides: ['++num_repeats=2'] });
    const [t0, t1, t2] = env.fixture.expected;
    const script = {
      '*': { answer: '@gold', turns: 3, tool_calls: 2, input_tokens: 100, output_tokens: 10 },
      [t0.task_id]: { answer: 'definitely wrong' },
      [t1.task_id]: { answer: null, text: '' },
      [t2.task_id]: { stop_reason: 'timeout' as const, answer: null },
    };
    const config = env.config(['++run_id=r1']);
    const result = await runAll({ config, logger: env.logger, agent: createScriptedAgent(script), progress: quiet });
    expect(result.status).toBe('complete');
    const rows = readRows(env.output);
    expect(rows).toHaveLength(12);
    expect(new Set(rows.map((r) => r.rollout_id)).size).toBe(12);
    const byTask = (id: string, repeat = 0) => rows.find((r) => r.task_id === id && r.repeat === repeat)!;
    const good = byTask(env.fixture.expected[3].task_id);
    expect(good).toMatchObject({
      run_id: 'r1', rollout_id: `r1-${env.fixture.expected[3].task_id}-0`, benchmark: 'babyvision_opencode',
      type: env.fixture.expected[3].type, subtype: env.fixture.expected[3].subtype, ans_type: env.fixture.expected[3].ans_type,
      expected_answer: env.fixture.expected[3].gold, extracted_answer: env.fixture.expected[3].gold,
      reward: 1, judge_verdict: 'equivalent', stop_reason: 'answered', failure_kind: null,
      turns: 3, tool_calls: 2, input_tokens: 100, output_tokens: 10, policy_model: 'policy', judge_model: 'gpt-4o-mini',
    });
    expect(byTask(t0.task_id)).toMatchObject({ reward: 0, judge_verdict: 'different', stop_reason: 'answered' });
    expect(byTask(t1.task_id)).toMatchObject({ reward: 0, judge_verdict: null, stop_reason: 'no_answer', judge_model: null });
    expect(byTask(t2.task_id)).toMatchObject({ reward: 0, judge_verdict: null, stop_reason: 'timeout' });
    // Rollouts without text or that did not complete never reach the judge: 12 rollouts, 4 of them (t1 and t2, twice).
    // The judge heard of the 4 answered tasks only (each repeat's identical prompt is a cache hit).
    const askedAbout = new Set(judge.requests.map((r) => r.fields.question!.split('\n')[0]));
    const answered = env.fixture.expected.filter((t) => t !== t1 && t !== t2).map((t) => t.question.trim());
    expect([...askedAbout].sort()).toEqual(answered.sort());
    expect(judge.requests.every((r) => !r.fields.noExtractedMarker)).toBe(true);
    const metrics = JSON.parse(readFileSync(metricsPathFor(env.output), 'utf8'));
    expect(metrics['mean/reward']).toBeCloseTo(6 / 12);
    expect(metrics['strict/reward']).toBeCloseTo(6 / 12);
    expect(metrics.num_rollouts).toBe(12);
    expect(metrics.num_masked).toBe(0);
    expect(metrics.stop_reasons).toEqual({ answered: 8, no_answer: 2, timeout: 2 });
    expect(metrics['repeats/means']).toEqual([0.5, 0.5]);
    expect(metrics['repeats/std']).toBe(0);
    expect(metrics['pass@k']['pass@1']).toBeCloseTo(0.5);
    // The consumer records which run this is, from the run record in Redis and the rows.
    const redis = new Redis(REDIS_URL);
    const record = (await new RunStore(redis, env.prefix).getRun('r1'))!;
    redis.disconnect();
    const lastFinish = rows.map((r) => r.finished_at).sort().at(-1)!;
    expect(metrics.run).toEqual({
      run_id: 'r1', benchmark: 'babyvision_opencode', policy_model: 'policy', judge_model: 'gpt-4o-mini',
      config_hash: configHash(record.settings), started_at: record.created_at, finished_at: lastFinish,
      wall_s: (Date.parse(lastFinish) - Date.parse(record.created_at)) / 1000,
    });
    expect(metrics.run.wall_s).toBeGreaterThan(0);
    expect(readFileSync(env.output, 'utf8')).not.toContain(FAKE_JUDGE_KEY);
  });

  it('masks judge failures, leaves them out of the mean, and rejudges them into scores', async () => {
    env = await makeFleetEnv({ rows: 4, judgeUrl: judge.url });
    judge.setScript(() => ({ status: 500, body: { error: { message: 'judge down' } } }));
    const config = env.config(['++run_id=r2']);
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(l) });
    const first = await runAll({ config, logger, progress: quiet });
    expect(first.status).toBe('complete');
    let rows = readRows(env.output);
    expect(rows.every((r) => r.failure_kind === 'judge_failed' && r.reward === null)).toBe(true);
    // The judge stage names the rollout on every judge line: 4 rollouts, 2 attempts each, 4 outcomes.
    const judgeLines = lines.map((l) => JSON.parse(l)).filter((l) => l.component === 'judge');
    expect(judgeLines).toHaveLength(12);
    expect(new Set(judgeLines.map((l) => l.rollout_id))).toEqual(new Set(rows.map((r) => r.rollout_id)));
    expect(first.metrics?.['mean/reward']).toBeNull();
    expect(first.metrics?.['strict/reward']).toBe(0);
    expect(first.metrics?.masked_by_kind).toEqual({ judge_failed: 4 });

    judge.setScript([]); // default grading for every request
    const redis = new Redis(REDIS_URL);
    const { sent } = await rejudge(redis, env.prefix, 'r2', env.logger, env.config().queues);
    redis.disconnect();
    expect(sent).toBe(4);
    const second = await runAll({ config, logger: env.logger, progress: quiet });
    expect(second.status).toBe('complete');
    rows = readRows(env.output);
    expect(rows).toHaveLength(4);
    expect(rows.every((r) => r.failure_kind === null && r.reward === 1)).toBe(true);
    expect(second.metrics?.['mean/reward']).toBe(1);
  });

  it('retries infrastructure failures, masks them after the last attempt, and `retry` brings them back', async () => {
    judge.setScript([]); // default grading for every request
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url, overrides: ['++queues.rollout_attempts=2'] });
    const failing = env.fixture.expected[0].task_id;
    const config = env.config(['++run_id=r3']);
    const agent = createScriptedAgent({ '*': { answer: '@gold' }, [failing]: { answer: '@gold', infra_fail_attempts: 5 } });
    const first = await runAll({ config, logger: env.logger, agent, progress: quiet });
    expect(first.status).toBe('complete');
    let rows = readRows(env.output);
    expect(rows.find((r) => r.task_id === failing)).toMatchObject({ failure_kind: 'infra_failed', reward: null });
    expect(first.metrics?.['mean/reward']).toBe(1);
    expect(first.metrics?.['strict/reward']).toBeCloseTo(2 / 3);

    const redis = new Redis(REDIS_URL);
    expect(await retryFailed(redis, env.prefix, 'r3', ['rollout'], env.logger)).toEqual({ rollout: 1, judge: 0, results: 0 });
    redis.disconnect();
    const healthy = createScriptedAgent({ '*': { answer: '@gold' } });
    const second = await runAll({ config, logger: env.logger, agent: healthy, progress: quiet });
    rows = readRows(env.output);
    expect(second.status).toBe('complete');
    expect(rows).toHaveLength(3);
    expect(rows.find((r) => r.task_id === failing)).toMatchObject({ failure_kind: null, reward: 1 });
  });

  it('keeps one row per rollout when a stage delivers twice, and a resumed run redoes nothing', async () => {
    judge.setScript([]); // default grading for every request
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url });
    const config = env.config(['++run_id=r4']);
    const agent = createScriptedAgent({ '*': { answer: '@gold' } });
    await runAll({ config, logger: env.logger, agent, progress: quiet });
    const before = readFileSync(env.output, 'utf8');
    const rows = readRows(env.output);
    const redis = new Redis(REDIS_URL);
    const results = openQueue('results', redis, env.prefix);
    const changed = { ...rows[0], reward: 0 as const, judge_verdict: 'different' as const };
    await results.add('row', { v: 1, row: rows[0] });
    await results.add('row', { v: 1, row: changed });
    await results.close();
    const requestsBefore = judge.requests.length;
    const again = await runAll({ config, logger: env.logger, agent, progress: quiet });
    redis.disconnect();
    expect(again.status).toBe('complete');
    expect(readFileSync(env.output, 'utf8')).toBe(before);
    expect(judge.requests.length).toBe(requestsBefore);
  });

  it('stops cleanly on abort and resumes with the same run id without redoing finished rollouts', async () => {
    judge.setScript([]); // default grading for every request
    env = await makeFleetEnv({ rows: 6, judgeUrl: judge.url, overrides: ['++queues.rollout_concurrency=1'] });
    const config = env.config(['++run_id=r5']);
    const ran: string[] = [];
    const inner = createScriptedAgent({ '*': { answer: '@gold', delay_ms: 300 } });
    const counting = { host: inner.host, run: (req: Parameters<typeof inner.run>[0], signal: AbortSignal) => (ran.push(req.rolloutId), inner.run(req, signal)), close: () => inner.close() };
    const stop = new AbortController();
    const first = runAll({ config, logger: env.logger, agent: counting, signal: stop.signal, progress: { update: (c) => c.num_rollouts >= 2 && stop.abort(), stop() {} } });
    const stopped = await first;
    expect(stopped.status).toBe('stopped');
    const doneBefore = readRows(env.output).map((r) => r.rollout_id);
    expect(doneBefore.length).toBeGreaterThanOrEqual(2);
    expect(doneBefore.length).toBeLessThan(6);
    ran.length = 0;
    const resumed = await runAll({ config, logger: env.logger, agent: counting, progress: quiet });
    expect(resumed.status).toBe('complete');
    const rows = readRows(env.output);
    expect(rows).toHaveLength(6);
    expect(new Set(rows.map((r) => r.rollout_id)).size).toBe(6);
    for (const id of doneBefore) expect(ran).not.toContain(id);
  });
});
