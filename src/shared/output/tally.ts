/**
 * A run's tally by rollout, for the progress line of `vcfleet run`, `vcfleet status`, the dashboard
 * and the run's warnings: the metrics accumulator (metrics.ts, the one count of a run's rows) plus
 * each rollout's last row, so that a replaced row (a rejudge, a retried masked rollout) is taken away
 * before its successor is counted. A reader that sees each rollout once (a scan of Redis) can use the
 * accumulator alone.
 */
import type { Row } from '../records/rows.ts';
import { MetricsAccumulator, metricRowOf, type MetricRow, type TallyCounts } from './metrics.ts';

export type { TallyCounts } from './metrics.ts';

type TallyRow = MetricRow & Pick<Row, 'rollout_id'>;

export class RowTally {
  readonly metrics = new MetricsAccumulator();
  private readonly seen = new Map<string, MetricRow>();

  /** Count a rollout's row; a rollout counted before is counted again as this row (its old row taken away). */
  add(row: TallyRow): void {
    const old = this.seen.get(row.rollout_id);
    if (old) this.metrics.remove(old);
    const now = metricRowOf(row);
    this.seen.set(row.rollout_id, now);
    this.metrics.add(now);
  }

  get counts(): TallyCounts {
    return this.metrics.counts();
  }
}

export function accuracyOf(c: Pick<TallyCounts, 'num_scored' | 'num_correct'>): number | null {
  return c.num_scored === 0 ? null : c.num_correct / c.num_scored;
}

/**
 * A run whose rollouts keep timing out without the policy server ever answering is not measuring
 * the model: say so. Null while nothing points that way.
 */
export function policySilenceWarning(c: Pick<TallyCounts, 'silent_timeouts' | 'answered_calls'>, minimum = 3): string | null {
  if (c.silent_timeouts < minimum || c.answered_calls > 0) return null;
  return `${c.silent_timeouts} rollouts timed out without a single answered policy call: is the policy server up and serving this model? (they score 0)`;
}
