/**
 * Accuracy of a group of rollouts (a type, a subtype) with its 95% Wilson score interval. Wilson
 * rather than the normal approximation because groups are small (a BabyVision subtype can have a
 * dozen scored rollouts) and often near 0 or 1, where the normal interval leaves [0, 1] or
 * collapses to a point.
 */

import { isScored } from '../shared/records/rows.ts';

/** z for a two-sided 95% interval. */
const Z95 = 1.959963984540054;

/** The 95% Wilson score interval of `correct` successes in `scored` trials; null when `scored` is 0. */
export function wilsonCi95(correct: number, scored: number): [number, number] | null {
  if (!Number.isInteger(correct) || !Number.isInteger(scored) || correct < 0 || correct > scored) {
    throw new RangeError(`wilsonCi95 needs whole counts with 0 <= correct <= scored, got ${correct}/${scored}`);
  }
  if (scored === 0) return null;
  const p = correct / scored;
  const z2n = (Z95 * Z95) / scored;
  const centre = (p + z2n / 2) / (1 + z2n);
  const half = (Z95 * Math.sqrt((p * (1 - p)) / scored + z2n / (4 * scored))) / (1 + z2n);
  // At p = 0 (p = 1) the exact lower (upper) bound is 0 (1); the formula gives it up to rounding.
  return [correct === 0 ? 0 : centre - half, correct === scored ? 1 : centre + half];
}

export interface GroupStat {
  /** The group's name (a type, or a subtype). */
  name: string;
  /** For a subtype: the type it belongs to (its first row's type). */
  type: string | null;
  rollouts: number;
  scored: number;
  correct: number;
  /** correct / scored; null when nothing is scored. */
  accuracy: number | null;
  ci95: [number, number] | null;
}

interface GroupRow {
  type: string;
  subtype: string;
  reward: 0 | 1 | null;
  failure_kind: 'judge_failed' | 'infra_failed' | null;
}

/** Accuracy with its Wilson interval for each group of `rows` by `key`, sorted by type, then name. */
export function groupStats(rows: readonly GroupRow[], key: 'type' | 'subtype'): GroupStat[] {
  const groups = new Map<string, { type: string; rollouts: number; scored: number; correct: number }>();
  for (const row of rows) {
    const name = row[key];
    let g = groups.get(name);
    if (!g) groups.set(name, (g = { type: row.type, rollouts: 0, scored: 0, correct: 0 }));
    g.rollouts++;
    if (isScored(row)) {
      g.scored++;
      if (row.reward === 1) g.correct++;
    }
  }
  return [...groups]
    .map(([name, g]) => ({
      name,
      type: key === 'subtype' ? g.type : null,
      rollouts: g.rollouts,
      scored: g.scored,
      correct: g.correct,
      accuracy: g.scored ? g.correct / g.scored : null,
      ci95: wilsonCi95(g.correct, g.scored),
    }))
    .sort((a, b) => (a.type ?? '').localeCompare(b.type ?? '') || a.name.localeCompare(b.name));
}
