/** Aggregate metrics checked against hand-computed examples. */
import { describe, expect, it } from 'vitest';
import { compareRuns } from '../../../src/shared/output/compare-runs.ts';
import { metricsRows } from '../../../src/cli/metrics-table.ts';
import { aggregateMetrics, bootstrapCi95, MetricsAccumulator, passAtK, type MetricRow } from '../../../src/shared/output/metrics.ts';

function row(task: string, repeat: number, reward: 0 | 1 | null, extra: Partial<MetricRow> = {}): MetricRow {
  return {
    task_id: task, repeat, type: 'T1', subtype: 'S1', reward,
    failure_kind: reward === null ? 'judge_failed' : null, stop_reason: 'answered',
    turns: 2, tool_calls: 1, input_tokens: 100, output_tokens: 10, wall_s: 1, ...extra,
  };
}

describe('aggregateMetrics', () => {
  it('leaves masked rows out of mean/reward and counts them as 0 in strict/reward', () => {
    const rows = [row('a', 0, 1), row('b', 0, 0), row('c', 0, 1), row('d', 0, null), row('e', 0, null, { failure_kind: 'infra_failed', stop_reason: null, turns: 0 })];
    const m = aggregateMetrics(rows);
    expect(m['mean/reward']).toBeCloseTo(2 / 3, 6);
    expect(m['strict/reward']).toBeCloseTo(2 / 5, 6);
    expect(m.num_rollouts).toBe(5);
    expect(m.num_scored).toBe(3);
    expect(m.num_masked).toBe(2);
    expect(m.masked_by_kind).toEqual({ judge_failed: 1, infra_failed: 1 });
    expect(m.stop_reasons).toEqual({ answered: 4 });
    expect(m['mean/turns']).toBeCloseTo(8 / 5, 6);
    expect(m['repeats/mean']).toBeUndefined();
  });

  it('counts the rows the judge gave no verdict by why, apart (a refused input is a 0, the others masked), and forged calls', () => {
    const rows = [
      row('a', 0, 0, { judge_failure: 'refused_input' }),
      row('b', 0, null, { judge_failure: 'no_verdict' }),
      row('c', 0, null, { judge_failure: 'no_verdict' }),
      row('d', 0, null, { judge_failure: 'unavailable' }),
      row('e', 0, 1, { forged_calls: 3 }),
      row('f', 0, 1),
    ];
    const m = aggregateMetrics(rows);
    expect(m.judge_failures).toEqual({ refused_input: 1, no_verdict: 2, unavailable: 1 });
    // The masks the model's own text can cause, counted apart.
    expect(m.judge_no_verdict).toBe(2);
    expect(m['mean/reward']).toBeCloseTo(2 / 3, 6);
    expect(m.masked_by_kind).toEqual({ judge_failed: 3 });
    expect(m).toMatchObject({ rollouts_with_forged_calls: 1, forged_calls: 3 });
  });

  it('gives accuracy by type and subtype over scored rows only', () => {
    const rows = [
      row('a', 0, 1, { type: 'Tracking', subtype: 'Maze' }),
      row('b', 0, 0, { type: 'Tracking', subtype: 'Maze' }),
      row('c', 0, 1, { type: 'Tracking', subtype: 'Lines' }),
      row('d', 0, null, { type: 'Spatial', subtype: 'Cubes' }),
    ];
    const m = aggregateMetrics(rows);
    expect(m.accuracy_by_type).toEqual({
      Spatial: { accuracy: null, scored: 0, rollouts: 1 },
      Tracking: { accuracy: 0.666667, scored: 3, rollouts: 3 },
    });
    expect(m.accuracy_by_subtype.Maze).toEqual({ accuracy: 0.5, scored: 2, rollouts: 2 });
    expect(m.accuracy_by_subtype.Lines).toEqual({ accuracy: 1, scored: 1, rollouts: 1 });
  });

  it('computes per-repeat means, their population std, and pass@k', () => {
    // Task a: 1,1,0; task b: 0,0,0; task c: 1,0,1 (3 repeats).
    const rows = [
      row('a', 0, 1), row('a', 1, 1), row('a', 2, 0),
      row('b', 0, 0), row('b', 1, 0), row('b', 2, 0),
      row('c', 0, 1), row('c', 1, 0), row('c', 2, 1),
    ];
    const m = aggregateMetrics(rows, 3);
    expect(m['repeats/means']).toEqual([0.666667, 0.333333, 0.333333]);
    expect(m['repeats/mean']).toBeCloseTo(4 / 9, 5);
    // population std of [2/3, 1/3, 1/3]: mean 4/9, deviations 2/9, -1/9, -1/9 -> sqrt((4+1+1)/81/3)
    expect(m['repeats/std']).toBeCloseTo(Math.sqrt(6 / 243), 5);
    // pass@1 = mean of c/n = (2/3 + 0 + 2/3)/3; pass@2: a 1, b 0, c 1 -> 2/3; pass@3: 2/3.
    expect(m['pass@k']!['pass@1']).toBeCloseTo(4 / 9, 5);
    expect(m['pass@k']!['pass@2']).toBeCloseTo(2 / 3, 5);
    expect(m['pass@k']!['pass@3']).toBeCloseTo(2 / 3, 5);
  });

  it('passAtK follows 1 - C(n-c,k)/C(n,k)', () => {
    expect(passAtK(5, 2, 1)).toBeCloseTo(0.4);
    expect(passAtK(5, 2, 2)).toBeCloseTo(1 - 3 / 10);
    expect(passAtK(5, 0, 3)).toBe(0);
    expect(passAtK(3, 2, 2)).toBe(1);
  });

  it('bootstraps a reproducible 95% interval that brackets the mean', () => {
    const values = Array.from({ length: 200 }, (_, i) => (i % 4 === 0 ? 0 : 1));
    const ci = bootstrapCi95(values)!;
    expect(ci).toEqual(bootstrapCi95(values));
    expect(ci[0]).toBeLessThan(0.75);
    expect(ci[1]).toBeGreaterThan(0.75);
    expect(ci[1] - ci[0]).toBeLessThan(0.15);
    expect(bootstrapCi95([])).toBeNull();
    expect(bootstrapCi95([1, 1, 1])).toEqual([1, 1]);
  });

  it('has null means and no interval for an empty run', () => {
    const m = aggregateMetrics([]);
    expect(m['mean/reward']).toBeNull();
    expect(m['strict/reward']).toBeNull();
    expect(m['mean/reward_ci95']).toBeNull();
  });

  it('keeps the same numbers row by row as over all rows at once', () => {
    const rows = [row('a', 0, null), row('b', 0, 0, { type: 'T2' }), row('a', 1, 1), row('c', 1, null, { failure_kind: 'infra_failed', stop_reason: null }), row('c', 0, 0, { wall_s: 2.5 })];
    const acc = new MetricsAccumulator();
    for (const r of rows) acc.add(r);
    expect(acc.result(2)).toEqual(aggregateMetrics(rows, 2));
    expect(acc.size).toBe(5);
    expect(acc.result(2).masked_by_kind).toEqual({ judge_failed: 1, infra_failed: 1 });
  });

  it('matches a brute-force bootstrap of 0/1 rewards', () => {
    const values = Array.from({ length: 120 }, (_, i) => (i % 3 === 0 ? 0 : 1));
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const means: number[] = [];
    for (let i = 0; i < 4000; i++) {
      let sum = 0;
      for (let j = 0; j < values.length; j++) sum += values[Math.floor(rand() * values.length)];
      means.push(sum / values.length);
    }
    means.sort((a, b) => a - b);
    const [lo, hi] = bootstrapCi95(values)!;
    expect(Math.abs(lo - means[Math.floor(0.025 * 3999)])).toBeLessThanOrEqual(0.02);
    expect(Math.abs(hi - means[Math.floor(0.975 * 3999)])).toBeLessThanOrEqual(0.02);
  });

  it('resamples tasks for its interval, repeats averaged per task, as compare does, and says so', () => {
    // 6 tasks x 2 repeats, each task's repeats alike but one: resampling rows (12 independent 0/1s) would be narrower.
    const rewards: Array<[string, 0 | 1, 0 | 1]> = [['a', 1, 1], ['b', 1, 1], ['c', 0, 0], ['d', 1, 0], ['e', 1, 1], ['f', 0, 0]];
    const rows = rewards.flatMap(([t, r0, r1]) => [row(t, 0, r0), row(t, 1, r1)]);
    const m = aggregateMetrics(rows, 2);
    expect(m.ci_unit).toBe('task');
    expect(m.ci_tasks).toBe(6);
    const side = (name: string) => ({ name, rows: rows.map((r) => ({ ...r, run_id: name, rollout_id: `${r.task_id}-${r.repeat}`, benchmark: 'b' })) });
    const compared = compareRuns(side('x'), side('y'));
    expect(m['mean/reward_ci95']).toEqual(compared.accuracy_a_ci95);
    expect(m['mean/reward_ci95']).not.toEqual(bootstrapCi95(rows.map((r) => r.reward as number)));
    const [, line] = metricsRows(m)[0];
    expect(line).toMatch(/^58\.3% {2}\[95% CI over 6 tasks, repeats averaged per task, bootstrap \d+\.\d% - \d+\.\d%\]$/);
  });
});
