/**
 * The one count of a run's rows by outcome, for progress lines, `vcfleet status`, the dashboard and
 * the run's warnings. A rollout's row may be replaced (a rejudge, a retried masked rollout): the
 * tally keeps each rollout's last outcome, so it is counted once.
 */
import type { Row } from './rows.ts';

export interface TallyCounts {
  /** Rollouts with a row (scored or masked). */
  done: number;
  scored: number;
  correct: number;
  masked: number;
  maskedByKind: Record<string, number>;
  stopReasons: Record<string, number>;
  /** Rows that timed out without a single answered policy call. */
  silentTimeouts: number;
  /** Rows with at least one answered policy call. */
  answeredCalls: number;
}

interface Summary {
  kind: string | null;
  reward: 0 | 1 | null;
  stop: string | null;
  turns: number;
}

export function emptyCounts(): TallyCounts {
  return { done: 0, scored: 0, correct: 0, masked: 0, maskedByKind: {}, stopReasons: {}, silentTimeouts: 0, answeredCalls: 0 };
}

function bump(map: Record<string, number>, key: string | null, sign: 1 | -1): void {
  if (key === null) return;
  const n = (map[key] ?? 0) + sign;
  if (n === 0) delete map[key];
  else map[key] = n;
}

export class RowTally {
  readonly counts: TallyCounts = emptyCounts();
  private readonly seen = new Map<string, Summary>();

  add(row: Pick<Row, 'rollout_id' | 'failure_kind' | 'reward' | 'stop_reason' | 'turns'>): void {
    const old = this.seen.get(row.rollout_id);
    if (old) this.apply(old, -1);
    const now: Summary = { kind: row.failure_kind, reward: row.reward, stop: row.stop_reason, turns: row.turns };
    this.seen.set(row.rollout_id, now);
    this.apply(now, 1);
  }

  private apply(s: Summary, sign: 1 | -1): void {
    const c = this.counts;
    c.done += sign;
    if (s.kind !== null) {
      c.masked += sign;
      bump(c.maskedByKind, s.kind, sign);
    } else {
      c.scored += sign;
      if (s.reward === 1) c.correct += sign;
    }
    bump(c.stopReasons, s.stop, sign);
    if (s.kind === null && s.stop === 'timeout' && s.turns === 0) c.silentTimeouts += sign;
    if (s.turns > 0) c.answeredCalls += sign;
  }
}

export function accuracyOf(c: Pick<TallyCounts, 'scored' | 'correct'>): number | null {
  return c.scored === 0 ? null : c.correct / c.scored;
}

/**
 * A run whose rollouts keep timing out without the policy server ever answering is not measuring
 * the model: say so. Null while nothing points that way.
 */
export function policySilenceWarning(c: Pick<TallyCounts, 'silentTimeouts' | 'answeredCalls'>, minimum = 3): string | null {
  if (c.silentTimeouts < minimum || c.answeredCalls > 0) return null;
  return `${c.silentTimeouts} rollouts timed out without a single answered policy call: is the policy server up and serving this model? (they score 0)`;
}
