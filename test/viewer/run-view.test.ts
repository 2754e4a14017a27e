/**
 * What the run page's charts are drawn from: the Wilson interval per group (checked against
 * published values), group counts that leave masked rows out of the scored ones, the outcome
 * breakdown, and histograms that count every value once.
 */
import { describe, expect, it } from 'vitest';
import { groupStats, wilsonCi95 } from '../../src/viewer/group-ci.ts';
import { histogram, niceStep } from '../../src/viewer/histogram.ts';
import { outcomeCounts, runView } from '../../src/viewer/run-view.ts';
import { writeViewerFixture } from '../helpers/viewer-fixture.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';

describe('wilsonCi95', () => {
  it('matches published Wilson score intervals', () => {
    // Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I: 81/263 -> 0.2553 to 0.3662.
    const close = (got: [number, number] | null, want: [number, number]) => {
      expect(got).not.toBeNull();
      expect(got![0]).toBeCloseTo(want[0], 4);
      expect(got![1]).toBeCloseTo(want[1], 4);
    };
    close(wilsonCi95(81, 263), [0.2553, 0.3662]);
    close(wilsonCi95(5, 10), [0.2366, 0.7634]);
    close(wilsonCi95(1, 5), [0.0362, 0.6245]);
    // At the ends the interval stays inside [0, 1] and does not collapse to a point.
    expect(wilsonCi95(0, 10)).toEqual([0, expect.closeTo(0.2775, 4)]);
    expect(wilsonCi95(10, 10)).toEqual([expect.closeTo(0.7225, 4), 1]);
    expect(wilsonCi95(0, 0)).toBeNull();
  });

  it('refuses counts that are not counts', () => {
    expect(() => wilsonCi95(3, 2)).toThrow(/0 <= correct <= scored, got 3\/2/);
    expect(() => wilsonCi95(0.5, 2)).toThrow(RangeError);
  });
});

describe('groupStats and outcomes', () => {
  const rows = [
    { type: 'T', subtype: 's1', reward: 1, failure_kind: null, stop_reason: 'answered' },
    { type: 'T', subtype: 's1', reward: 0, failure_kind: null, stop_reason: 'no_answer' },
    { type: 'T', subtype: 's2', reward: null, failure_kind: 'judge_failed', stop_reason: 'answered' },
    { type: 'S', subtype: 's3', reward: null, failure_kind: 'infra_failed', stop_reason: null },
  ] as const;

  it('counts scored and correct without masked rows, keeps every rollout, sorts by type then name', () => {
    expect(groupStats(rows, 'type')).toEqual([
      { name: 'S', type: null, rollouts: 1, scored: 0, correct: 0, accuracy: null, ci95: null },
      { name: 'T', type: null, rollouts: 3, scored: 2, correct: 1, accuracy: 0.5, ci95: wilsonCi95(1, 2) },
    ]);
    expect(groupStats(rows, 'subtype').map((g) => [g.type, g.name, g.scored])).toEqual([['S', 's3', 0], ['T', 's1', 2], ['T', 's2', 0]]);
  });

  it('gives every row one outcome, masked ones by failure kind, with zeros shown', () => {
    const counts = Object.fromEntries(outcomeCounts(rows).map((o) => [o.outcome, [o.count, o.masked]]));
    expect(counts).toEqual({
      answered: [1, false], no_answer: [1, false], timeout: [0, false], output_cap: [0, false], context_limit: [0, false],
      agent_error: [0, false], judge_failed: [1, true], infra_failed: [1, true],
    });
  });
});

describe('histogram', () => {
  it('puts whole numbers one value per bin while the range is small', () => {
    const h = histogram([1, 1, 2, 5], { integer: true });
    expect(h.bins.map((b) => [b.lo, b.count])).toEqual([[1, 2], [2, 1], [3, 0], [4, 0], [5, 1]]);
  });

  it('uses nice steps for wide ranges and counts every value once, the maximum included', () => {
    expect([0.3, 1, 1.2, 7, 23].map(niceStep)).toEqual([0.5, 1, 2, 10, 50]);
    const values = Array.from({ length: 1000 }, (_, i) => (i * 7.3) % 431);
    const h = histogram(values, { integer: false });
    expect(h.bins.length).toBeLessThanOrEqual(20);
    expect(h.bins[0].lo).toBe(0);
    expect(h.bins[1].lo - h.bins[0].lo).toBe(50);
    expect(h.bins.reduce((n, b) => n + b.count, 0)).toBe(1000);
    expect(histogram([0, 10, 20], { integer: false }).bins.at(-1)).toMatchObject({ hi: 20, count: 1 });
    expect(histogram([], { integer: true })).toEqual({ bins: [], total: 0, integer: true });
  });
});

describe('runView', () => {
  it('turns a fixture run into the numbers its charts show', () => {
    const f = writeViewerFixture(createTmpDir(), [{ runId: 'r', rollouts: [
      { task_id: '1', type: 'A', subtype: 'a', outcome: 'correct' },
      { task_id: '2', type: 'A', subtype: 'a', outcome: 'wrong', extra_turns: 2 },
      { task_id: '3', type: 'B', subtype: 'b', outcome: 'timeout' },
    ] }]);
    const view = runView(f.rows);
    expect(view.by_type.map((g) => [g.name, g.accuracy])).toEqual([['A', 0.5], ['B', 0]]);
    expect(view.histograms.turns.bins.map((b) => [b.lo, b.count])).toEqual([[2, 2], [3, 0], [4, 1]]);
    expect(view.outcomes.find((o) => o.outcome === 'timeout')?.count).toBe(1);
    removeTmpDirs();
  });
});
