/**
 * What the run page draws, computed once on the server from a run's rows: accuracy by type and by
 * subtype with Wilson intervals, the outcome breakdown, and histograms of turns, tool calls and
 * wall time. Pure, so the numbers the charts show are tested without a browser.
 */
import { STOP_REASONS } from '../shared/ports/agent.ts';
import { FAILURE_KINDS, type Row } from '../shared/records/rows.ts';
import { groupStats, type GroupStat } from './group-ci.ts';
import { histogram, type Histogram } from './histogram.ts';

/** Every outcome a row can have, in the order the breakdown shows them. */
export const OUTCOMES = [...STOP_REASONS, ...FAILURE_KINDS] as const;
export type Outcome = (typeof OUTCOMES)[number] | 'unknown';

/**
 * A row's one outcome: masked rows by their failure kind (an answered rollout whose judge failed is
 * `judge_failed`), the others by their stop reason.
 */
export function outcomeOf(row: Pick<Row, 'failure_kind' | 'stop_reason'>): Outcome {
  return row.failure_kind ?? row.stop_reason ?? 'unknown';
}

export interface OutcomeCount {
  outcome: Outcome;
  count: number;
  /** Left out of every mean (judge_failed, infra_failed). */
  masked: boolean;
}

export interface RunView {
  by_type: GroupStat[];
  by_subtype: GroupStat[];
  /** Every outcome, zeros included, so a missing bar means nothing happened rather than unknown. */
  outcomes: OutcomeCount[];
  histograms: { turns: Histogram; tool_calls: Histogram; wall_s: Histogram };
}

export function outcomeCounts(rows: readonly Pick<Row, 'failure_kind' | 'stop_reason'>[]): OutcomeCount[] {
  const counts = new Map<Outcome, number>(OUTCOMES.map((o) => [o, 0]));
  for (const row of rows) {
    const o = outcomeOf(row);
    counts.set(o, (counts.get(o) ?? 0) + 1);
  }
  const masked = new Set<string>(FAILURE_KINDS);
  return [...counts].map(([outcome, count]) => ({ outcome, count, masked: masked.has(outcome) }));
}

export function runView(rows: readonly Row[]): RunView {
  return {
    by_type: groupStats(rows, 'type'),
    by_subtype: groupStats(rows, 'subtype'),
    outcomes: outcomeCounts(rows),
    histograms: {
      turns: histogram(rows.map((r) => r.turns), { integer: true }),
      tool_calls: histogram(rows.map((r) => r.tool_calls), { integer: true }),
      wall_s: histogram(rows.map((r) => r.wall_s), { integer: false }),
    },
  };
}
