/**
 * Run against run: two runs' rows paired by task. A side's score of a task is the mean reward of its
 * scored rows of that task (masked rows are no score); a task scored on one side only is listed as
 * unpaired and left out of every figure. Over the paired tasks: both accuracies, the difference B − A
 * with its 95% paired-bootstrap interval (paired-stats.ts), the flips both ways, and a p: McNemar's
 * exact test when every paired task has one scored row a side, else the sign test over the per-task
 * differences; the same per type and per subtype. Pure: the same rows give the same report.
 */
import { DataError } from '../errors.ts';
import { isScored } from '../scoring/scored.ts';
import { exactBinomialP, pairedBootstrapCi95 } from './paired-stats.ts';

/** What the comparison needs of a row. */
export interface CompareRow {
  run_id: string;
  rollout_id: string;
  task_id: string;
  benchmark: string;
  type: string;
  subtype: string;
  reward: number | null;
  failure_kind: string | null;
}

/** One side of the comparison: its rows and what names it to a person (a file, or a run id in Redis). */
export interface CompareSide {
  name: string;
  rows: readonly CompareRow[];
}

export interface ComparisonFigures {
  /** Tasks scored on both sides. */
  pairs: number;
  accuracy_a: number | null;
  accuracy_b: number | null;
  /** 95% bootstrap intervals of each side's accuracy over the pairs (for charts). */
  accuracy_a_ci95: [number, number] | null;
  accuracy_b_ci95: [number, number] | null;
  /** B − A over the pairs. */
  difference: number | null;
  difference_ci95: [number, number] | null;
  /** Paired tasks A scores higher than B (with one repeat a side: A right, B wrong). */
  a_right_b_wrong: number;
  /** Paired tasks B scores higher than A. */
  a_wrong_b_right: number;
  /** McNemar's exact p (one scored row a side per task), else the sign test's; null with no pairs. */
  mcnemar_p: number | null;
  /** Which test gave `mcnemar_p`. */
  p_method: 'mcnemar_exact' | 'sign_test';
}

/** A paired task whose score differs between the runs, with the rollouts that made each score. */
export interface FlippedTask {
  task_id: string;
  type: string;
  subtype: string;
  score_a: number;
  score_b: number;
  rollouts_a: string[];
  rollouts_b: string[];
}

export interface Comparison extends ComparisonFigures {
  a: { name: string; run_id: string; benchmark: string };
  b: { name: string; run_id: string; benchmark: string };
  /** Tasks scored on one side only (left out), with the side that scored them. */
  unpaired: Array<{ task_id: string; scored_in: 'a' | 'b' }>;
  by_type: Record<string, ComparisonFigures>;
  by_subtype: Record<string, ComparisonFigures>;
  flipped: FlippedTask[];
}

interface TaskScore {
  type: string;
  subtype: string;
  sum: number;
  scored: number;
  rollouts: string[];
}

const round = (x: number | null): number | null => (x === null ? null : Math.round(x * 1e6) / 1e6);

/** Each task's scored rows of one side. */
function taskScores(rows: readonly CompareRow[]): Map<string, TaskScore> {
  const out = new Map<string, TaskScore>();
  for (const row of rows) {
    if (!isScored(row)) continue;
    let t = out.get(row.task_id);
    if (!t) out.set(row.task_id, (t = { type: row.type, subtype: row.subtype, sum: 0, scored: 0, rollouts: [] }));
    t.sum += row.reward ?? 0;
    t.scored += 1;
    t.rollouts.push(row.rollout_id);
  }
  return out;
}

interface Pair {
  task_id: string;
  a: TaskScore;
  b: TaskScore;
}

const scoreOf = (t: TaskScore): number => t.sum / t.scored;

/** The figures over a set of pairs. */
export function figuresOf(pairs: readonly Pair[], seed = 1): ComparisonFigures {
  const n = pairs.length;
  const single = pairs.every((p) => p.a.scored === 1 && p.b.scored === 1);
  const p_method = single ? 'mcnemar_exact' : 'sign_test';
  if (n === 0) {
    return {
      pairs: 0, accuracy_a: null, accuracy_b: null, accuracy_a_ci95: null, accuracy_b_ci95: null, difference: null, difference_ci95: null,
      a_right_b_wrong: 0, a_wrong_b_right: 0, mcnemar_p: null, p_method,
    };
  }
  const diffs = pairs.map((p) => scoreOf(p.b) - scoreOf(p.a));
  const accA = pairs.reduce((s, p) => s + scoreOf(p.a), 0) / n;
  const accB = pairs.reduce((s, p) => s + scoreOf(p.b), 0) / n;
  // Differences within rounding of 0 are ties, not flips.
  const aBetter = diffs.filter((d) => d < -1e-12).length;
  const bBetter = diffs.filter((d) => d > 1e-12).length;
  return {
    pairs: n, accuracy_a: round(accA), accuracy_b: round(accB),
    accuracy_a_ci95: pairedBootstrapCi95(pairs.map((p) => scoreOf(p.a)), seed), accuracy_b_ci95: pairedBootstrapCi95(pairs.map((p) => scoreOf(p.b)), seed),
    difference: round(accB - accA),
    difference_ci95: pairedBootstrapCi95(diffs, seed), a_right_b_wrong: aBetter, a_wrong_b_right: bBetter,
    mcnemar_p: exactBinomialP(aBetter, bBetter), p_method,
  };
}

/** The one run and benchmark of a side; a side of several runs or benchmarks is refused, naming them. */
function identityOf(side: CompareSide): { name: string; run_id: string; benchmark: string } {
  if (side.rows.length === 0) throw new DataError(`${side.name} holds no rows to compare`);
  const runs = [...new Set(side.rows.map((r) => r.run_id))];
  if (runs.length > 1) throw new DataError(`${side.name} holds ${runs.length} runs (${runs.join(', ')}): compare takes one run a side; pass a file of one run, or a run id`);
  const benchmarks = [...new Set(side.rows.map((r) => r.benchmark))];
  if (benchmarks.length > 1) throw new DataError(`${side.name} holds rows of ${benchmarks.join(' and ')}: one benchmark a side`);
  return { name: side.name, run_id: runs[0], benchmark: benchmarks[0] };
}

function groupBy(pairs: readonly Pair[], key: (p: Pair) => string, seed: number): Record<string, ComparisonFigures> {
  const groups = new Map<string, Pair[]>();
  for (const p of pairs) groups.set(key(p), [...(groups.get(key(p)) ?? []), p]);
  return Object.fromEntries([...groups.entries()].sort(([x], [y]) => x.localeCompare(y)).map(([k, ps]) => [k, figuresOf(ps, seed)]));
}

/** Compare run B against run A; refuses two runs of different benchmarks, naming both. */
export function compareRuns(a: CompareSide, b: CompareSide, seed = 1): Comparison {
  const idA = identityOf(a);
  const idB = identityOf(b);
  if (idA.benchmark !== idB.benchmark) {
    throw new DataError(`${a.name} is a run of ${idA.benchmark} and ${b.name} of ${idB.benchmark}: compare runs of one benchmark`);
  }
  const scoresA = taskScores(a.rows);
  const scoresB = taskScores(b.rows);
  const pairs: Pair[] = [];
  const unpaired: Comparison['unpaired'] = [];
  for (const [task_id, sa] of scoresA) {
    const sb = scoresB.get(task_id);
    if (sb) pairs.push({ task_id, a: sa, b: sb });
    else unpaired.push({ task_id, scored_in: 'a' });
  }
  for (const task_id of scoresB.keys()) if (!scoresA.has(task_id)) unpaired.push({ task_id, scored_in: 'b' });
  pairs.sort((x, y) => x.task_id.localeCompare(y.task_id));
  unpaired.sort((x, y) => x.task_id.localeCompare(y.task_id));
  const flipped = pairs
    .filter((p) => Math.abs(scoreOf(p.b) - scoreOf(p.a)) > 1e-12)
    .map((p): FlippedTask => ({
      task_id: p.task_id, type: p.a.type, subtype: p.a.subtype, score_a: round(scoreOf(p.a))!, score_b: round(scoreOf(p.b))!,
      rollouts_a: p.a.rollouts, rollouts_b: p.b.rollouts,
    }));
  return {
    a: idA, b: idB, ...figuresOf(pairs, seed), unpaired,
    by_type: groupBy(pairs, (p) => p.a.type, seed),
    by_subtype: groupBy(pairs, (p) => p.a.subtype, seed),
    flipped,
  };
}
