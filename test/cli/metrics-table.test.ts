/** The summary table's metrics lines: the same whether `vcfleet run` or `vcfleet metrics` prints them. */
import { describe, expect, it } from 'vitest';
import { summaryText } from '../../src/cli/commands/run.ts';
import { duration, metricsRows, reportRows } from '../../src/cli/metrics-table.ts';
import { aggregateMetrics, type MetricRow } from '../../src/shared/output/metrics.ts';

function row(task: string, type: string, reward: 0 | 1 | null, stop: MetricRow['stop_reason'] = 'answered'): MetricRow {
  return {
    task_id: task, repeat: 0, type, subtype: 'S', reward, failure_kind: reward === null ? 'judge_failed' : null,
    stop_reason: stop, turns: 1, tool_calls: 0, input_tokens: 1, output_tokens: 1, wall_s: 1,
  };
}

/** A printed table back into [label, value] pairs (columns are at least two spaces apart). */
const cells = (text: string) => text.split('\n').map((l) => /^(\s*\S.*?)\s{2,}(\S.*)$/.exec(l)!.slice(1, 3));

describe('metricsRows', () => {
  it('gives exactly the metrics lines of the summary `vcfleet run` prints', () => {
    const metrics = aggregateMetrics([row('a', 'Tracking', 1), row('b', 'Tracking', 0), row('c', 'Spatial', null), row('d', 'Spatial', 0, 'timeout')]);
    const summary = cells(summaryText({ runId: 'r', status: 'complete', total: 4, done: 4, masked: 1, outputPath: 'o.jsonl', metricsPath: 'o_m.json', metrics }));
    const mine = [...metricsRows(metrics), ...reportRows(metrics)].map((r) => r.map(String));
    expect(summary.slice(2, -2)).toEqual(mine);
    expect(mine).toContainEqual(['scored / masked', '3 / 1 (judge_failed 1)']);
    expect(mine).toContainEqual(['  Tracking', '50.0% (2 scored)']);
    // The paper's table: every rollout of the pass counted (the masked one as wrong): 1 of 4.
    expect(mine).toContainEqual(['paper table (1 pass)', '25.0 ± 0.0  (1 of 4 rollouts masked, counted wrong)']);
  });

  it('writes durations as seconds, minutes or hours', () => {
    expect(duration(4.46)).toBe('4.5s');
    expect(duration(123)).toBe('2m 03s');
    expect(duration(5400)).toBe('1h 30m 00s');
  });
});
