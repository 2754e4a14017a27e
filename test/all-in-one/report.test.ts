/**
 * The evaluator's report on a real run (the in-process fleet on the session's Redis, a scripted agent
 * whose answers change from pass to pass, the real judge client against a scripted judge server):
 * the paper's table equals what the rows say (mean and population std over passes, overall, per
 * type, per subtype; masked and unfinished rollouts count as wrong) and is printed with ±; the judge's
 * tokens reach the rows (a cached verdict counts 0); with prices set, `cost_usd` is the tokens times
 * the prices. The table's pure parts are checked against hand-computed numbers.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runAll } from '../../src/all-in-one/run-all.ts';
import { createScriptedAgent } from '../../src/agent/scripted-agent.ts';
import { summaryText } from '../../src/cli/commands/run.ts';
import { RowSchema, type Row } from '../../src/shared/records/rows.ts';
import { aggregateMetrics, metricsPathFor, type MetricRow } from '../../src/shared/output/metrics.ts';
import { paperCellText, paperTable } from '../../src/shared/output/paper-table.ts';
import { DEFAULT_PUBLISHED_RESULTS, readPublishedResults } from '../../src/shared/output/published-results.ts';
import { RowTally } from '../../src/shared/output/tally.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { makeFleetEnv, runCli, type FleetEnv } from '../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';

const quiet = { update() {}, stop() {} };

/** Mean and population std of `xs`, written out. */
function meanStd(xs: number[]): { mean: number; std: number } {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  return { mean, std: Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / xs.length) };
}

/** What the rows say of a group: per pass, correct (reward 1, not masked) over every rollout of the pass. */
function fromRows(rows: readonly Row[], passes: number, keep: (r: Row) => boolean): { mean: number; std: number; per_pass: number[] } {
  const perPass = Array.from({ length: passes }, (_, p) => {
    const pass = rows.filter((r) => r.repeat === p && keep(r));
    return pass.filter((r) => r.reward === 1 && r.failure_kind === null).length / pass.length;
  });
  return { ...meanStd(perPass), per_pass: perPass };
}

function metricRow(task: string, repeat: number, type: string, subtype: string, reward: 0 | 1 | null): MetricRow {
  return {
    task_id: task, repeat, type, subtype, reward, failure_kind: reward === null ? 'judge_failed' : null, stop_reason: 'answered',
    turns: 1, tool_calls: 0, input_tokens: 100, output_tokens: 10, wall_s: 1, judge_input_tokens: 50, judge_output_tokens: 5,
  };
}

describe('the paper table (pure)', () => {
  // Pass 0: t1 1, t2 1, t3 0, t4 1; pass 1: t1 1, t2 0, t3 masked, t4 1; pass 2: t1 0, t2 0, t3 1, t4 1.
  const rows = [
    ['t1', 'A', 'a1', [1, 1, 0]], ['t2', 'A', 'a2', [1, 0, 0]], ['t3', 'B', 'b1', [0, null, 1]], ['t4', 'B', 'b1', [1, 1, 1]],
  ].flatMap(([task, type, subtype, rewards]) => (rewards as Array<0 | 1 | null>).map((r, p) => metricRow(task as string, p, type as string, subtype as string, r)));

  it('gives mean ± population std over passes, every rollout in the denominator, as computed by hand', () => {
    const t = paperTable(rows, 3);
    expect(t.passes).toBe(3);
    expect(t.overall.per_pass).toEqual([0.75, 0.5, 0.5]);
    expect(t.overall.mean).toBeCloseTo(7 / 12, 6);
    expect(t.overall.std).toBeCloseTo(Math.sqrt(((0.75 - 7 / 12) ** 2 + 2 * (0.5 - 7 / 12) ** 2) / 3), 6);
    expect(t.by_type.A).toMatchObject({ mean: 0.5, per_pass: [1, 0.5, 0] });
    expect(t.by_type.A.std).toBeCloseTo(Math.sqrt(0.5 / 3), 6);
    expect(t.by_type.B.per_pass).toEqual([0.5, 0.5, 1]);
    expect(t.by_subtype.a2.mean).toBeCloseTo(1 / 3, 6);
    expect(t.by_subtype.a2.std).toBeCloseTo(Math.sqrt(2 / 9), 6);
    expect(Object.keys(t.by_subtype)).toEqual(['a1', 'a2', 'b1']);
    expect(paperCellText({ mean: 0.497, std: 0.012 })).toBe('49.7 ± 1.2');
    expect(paperCellText(t.overall)).toBe('58.3 ± 11.8');
  });

  it('is kept row by row: a replaced row is taken away (a rejudge of the masked one)', () => {
    const tally = new RowTally();
    rows.forEach((r, i) => tally.add({ ...r, rollout_id: `${r.task_id}-${r.repeat}` } as never));
    tally.add({ ...metricRow('t3', 1, 'B', 'b1', 1), rollout_id: 't3-1' } as never);
    const fresh = rows.map((r) => (r.task_id === 't3' && r.repeat === 1 ? metricRow('t3', 1, 'B', 'b1', 1) : r));
    expect(tally.metrics.result(3).paper).toEqual(paperTable(fresh, 3));
    expect(tally.metrics.result(3).paper!.overall.per_pass).toEqual([0.75, 0.75, 0.5]);
  });

  it('totals policy and judge tokens, and prices them when prices are set', () => {
    const m = aggregateMetrics(rows, 3, { policy: { input_usd_per_mtok: 2, output_usd_per_mtok: 8 }, judge: { input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.6 } });
    expect(m.tokens).toEqual({ policy: { input: 1200, output: 120 }, judge: { input: 600, output: 60 } });
    expect(m.cost_usd!.policy).toBeCloseTo((1200 * 2 + 120 * 8) / 1e6, 10);
    expect(m.cost_usd!.judge).toBeCloseTo((600 * 0.15 + 60 * 0.6) / 1e6, 10);
    expect(m.cost_usd!.total).toBeCloseTo((1200 * 2 + 120 * 8 + 600 * 0.15 + 60 * 0.6) / 1e6, 10);
    expect(aggregateMetrics(rows, 3).cost_usd).toBeUndefined();
    const judgeOnly = aggregateMetrics(rows, 3, { policy: { input_usd_per_mtok: null, output_usd_per_mtok: null }, judge: { input_usd_per_mtok: 1, output_usd_per_mtok: null } });
    expect(judgeOnly.cost_usd).toEqual({ policy: null, judge: 600 / 1e6, total: 600 / 1e6 });
  });
});

describe('the published rows', () => {
  it('ships the paper\'s rows, reads a user\'s extended copy, and names a bad file and its key', () => {
    const shipped = readPublishedResults();
    expect(shipped[0]).toEqual({ kind: 'no_tool', name: 'Human adults', overall: 94.1 });
    expect(shipped.map((r) => r.overall)).toEqual([94.1, 49.7, 34.4, 30.2, 19.2, 16.2, 14.2]);
    const dir = createTmpDir();
    const mine = path.join(dir, 'mine.yaml');
    writeFileSync(mine, `${readFileSync(DEFAULT_PUBLISHED_RESULTS, 'utf8')}  - name: Our model v2\n    overall: 41.3\n`);
    expect(readPublishedResults(mine).at(-1)).toEqual({ kind: 'no_tool', name: 'Our model v2', overall: 41.3 });
    const bad = path.join(dir, 'bad.yaml');
    writeFileSync(bad, 'rows:\n  - name: X\n    overall: 140\n');
    expect(() => readPublishedResults(bad)).toThrow(`${bad} (report.published_results): rows.0.overall:`);
  });
});

describe('the report of a run with ++num_repeats=3', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  afterEach(async () => {
    await env?.cleanup();
    removeTmpDirs();
  });

  it('gives the table the rows say, printed with ±; judge tokens on the rows; cost_usd = tokens × prices', async () => {
    judge.setScript([]);
    const prices = ['++pricing.policy.input_usd_per_mtok=3', '++pricing.policy.output_usd_per_mtok=15', '++pricing.judge.input_usd_per_mtok=0.15', '++pricing.judge.output_usd_per_mtok=0.6'];
    env = await makeFleetEnv({ rows: 6, judgeUrl: judge.url, overrides: ['++num_repeats=3', ...prices] });
    const [t0, t1, t2, t3] = env.fixture.expected.map((t) => t.task_id);
    const wrong = { answer: 'definitely wrong' };
    const script = {
      '*': { answer: '@gold', input_tokens: 100, output_tokens: 10 },
      [`${t0}#1`]: wrong, [`${t1}#2`]: wrong, [`${t2}#0`]: wrong, [`${t2}#2`]: wrong,
      [`${t3}#1`]: { stop_reason: 'timeout' as const, answer: null },
    };
    const result = await runAll({ config: env.config(['++run_id=paper1']), logger: env.logger, agent: createScriptedAgent(script), progress: quiet });
    expect(result.status).toBe('complete');
    const rows = readFileSync(env.output, 'utf8').trim().split('\n').map((l) => RowSchema.parse(JSON.parse(l)));
    expect(rows).toHaveLength(18);
    const metrics = JSON.parse(readFileSync(metricsPathFor(env.output), 'utf8'));
    const paper = metrics.paper;
    expect(paper.passes).toBe(3);
    const overall = fromRows(rows, 3, () => true);
    expect(paper.overall.per_pass).toEqual(overall.per_pass.map((x) => Math.round(x * 1e6) / 1e6));
    expect(new Set(overall.per_pass).size).toBeGreaterThan(1); // the answers changed from pass to pass
    expect(paper.overall.mean).toBeCloseTo(overall.mean, 6);
    expect(paper.overall.std).toBeCloseTo(overall.std, 6);
    for (const type of new Set(rows.map((r) => r.type))) {
      const want = fromRows(rows, 3, (r) => r.type === type);
      expect(paper.by_type[type].mean, type).toBeCloseTo(want.mean, 6);
      expect(paper.by_type[type].std, type).toBeCloseTo(want.std, 6);
    }
    for (const subtype of new Set(rows.map((r) => r.subtype))) {
      const want = fromRows(rows, 3, (r) => r.subtype === subtype);
      expect(paper.by_subtype[subtype].mean, subtype).toBeCloseTo(want.mean, 6);
      expect(paper.by_subtype[subtype].std, subtype).toBeCloseTo(want.std, 6);
    }
    // By hand: pass 0 misses t2, pass 1 t0 and t3 (timed out), pass 2 t1 and t2: 5/6, 4/6, 4/6.
    expect(paper.overall.per_pass).toEqual([0.833333, 0.666667, 0.666667]);
    const text = summaryText(result, readPublishedResults());
    expect(text).toMatch(/^paper table \(3 passes\) +72\.2 ± 7\.9$/m);
    for (const type of Object.keys(paper.by_type)) expect(text).toMatch(new RegExp(`^  ${type} +\\d+\\.\\d ± \\d+\\.\\d$`, 'm'));
    expect(text).toMatch(/^ {2}Human adults +94\.1$/m);
    // The judge's tokens: 100 in / 20 out per call the scripted judge answers; a cached verdict counts 0.
    const judged = rows.filter((r) => r.judge_verdict !== null);
    const calls = new Set(judge.requests.map((r) => JSON.stringify(r.fields))).size;
    expect(judged.filter((r) => r.judge_input_tokens === 100 && r.judge_output_tokens === 20)).toHaveLength(calls);
    expect(judged.filter((r) => r.judge_input_tokens === 0)).toHaveLength(judged.length - calls);
    expect(rows.filter((r) => r.judge_verdict === null).every((r) => r.judge_input_tokens === 0)).toBe(true);
    const tokens = metrics.tokens;
    expect(tokens.judge).toEqual({ input: 100 * calls, output: 20 * calls });
    expect(tokens.policy).toEqual({ input: rows.reduce((s, r) => s + r.input_tokens, 0), output: rows.reduce((s, r) => s + r.output_tokens, 0) });
    const want = (tokens.policy.input * 3 + tokens.policy.output * 15 + tokens.judge.input * 0.15 + tokens.judge.output * 0.6) / 1e6;
    expect(metrics.cost_usd.total).toBeCloseTo(want, 8);
    expect(text).toMatch(/^cost +\$/m);
    // `vcfleet metrics` recomputes from the rows alone and keeps the prices the results consumer recorded.
    const recomputed = await runCli(['metrics', env.output, '--json', '--stdout']);
    expect(recomputed.code, recomputed.output).toBe(0);
    expect(JSON.parse(recomputed.stdout).paper1).toMatchObject({ paper, tokens, cost_usd: metrics.cost_usd, pricing: metrics.pricing });
    // `vcfleet status` prints the same table from the rows in Redis.
    const status = await runCli(['status', '--run-id', 'paper1', ...env.overrides]);
    expect(status.code, status.output).toBe(0);
    expect(status.stdout).toMatch(/^paper table \(3 passes, every rollout counted\) +72\.2 ± 7\.9$/m);
    expect(status.stdout).toMatch(/^ {2}Human adults +94\.1$/m);
    // `vcfleet compare` reads a side by run id from Redis: the run against its own file pairs every task, no flip.
    const compared = await runCli(['compare', 'paper1', env.output, '--json', ...env.overrides]);
    expect(compared.code, compared.output).toBe(0);
    expect(JSON.parse(compared.stdout)).toMatchObject({ pairs: 6, unpaired: [], difference: 0, a_right_b_wrong: 0, a_wrong_b_right: 0, mcnemar_p: 1, p_method: 'sign_test' });
    expect(compared.output).toContain('A: 18 rows from run paper1');
  }, 180_000);
});
