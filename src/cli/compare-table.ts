/** The text of `vcfleet compare`: the headline figures, then per type and per subtype, the flips and the unpaired tasks. */
import type { Comparison, ComparisonFigures } from '../shared/output/compare-runs.ts';
import { percent } from './metrics-table.ts';
import { table } from './runtime.ts';

/** A difference in percentage points with its sign: `+3.2 pp`. */
function points(x: number | null): string {
  if (x === null) return '-';
  const v = 100 * x;
  const text = Math.abs(v).toFixed(1);
  return `${Number(text) === 0 ? '' : v > 0 ? '+' : '-'}${text} pp`;
}

function ci(x: [number, number] | null): string {
  return x ? `[${points(x[0])}, ${points(x[1])}]` : '-';
}

function p(x: number | null): string {
  return x === null ? '-' : x < 0.0001 ? '<0.0001' : x.toFixed(4);
}

function groupRows(groups: Record<string, ComparisonFigures>, indent: string): Array<Array<string | number>> {
  return Object.entries(groups).map(([k, f]) => [
    `${indent}${k}`, f.pairs, percent(f.accuracy_a), percent(f.accuracy_b), points(f.difference), ci(f.difference_ci95), f.a_right_b_wrong, f.a_wrong_b_right, p(f.mcnemar_p),
  ]);
}

/** A task's score: 0 or 1, or the mean of its repeats to two places. */
const score = (x: number): string => (x === 0 || x === 1 ? String(x) : x.toFixed(2));

export function comparisonText(c: Comparison): string {
  const single = c.p_method === 'mcnemar_exact';
  const test = single ? "(McNemar's exact test)" : '(sign test over the per-task differences: repeats)';
  const flips = single
    ? `A right, B wrong ${c.a_right_b_wrong}; A wrong, B right ${c.a_wrong_b_right}`
    : `A higher ${c.a_right_b_wrong}; B higher ${c.a_wrong_b_right} (tasks, by mean reward of their repeats)`;
  const head = table([
    ['A', `${c.a.name} (run ${c.a.run_id}, ${c.a.benchmark})`],
    ['B', `${c.b.name} (run ${c.b.run_id}, ${c.b.benchmark})`],
    ['paired tasks', `${c.pairs}${c.unpaired.length ? ` (${c.unpaired.length} unpaired, left out)` : ''}`],
    ['accuracy A / B', `${percent(c.accuracy_a)} / ${percent(c.accuracy_b)}`],
    ['B - A', `${points(c.difference)}  95% CI ${ci(c.difference_ci95)} (paired bootstrap over tasks)`],
    ['flips', flips],
    ['p', `${p(c.mcnemar_p)} ${test}`],
  ]);
  const header = ['', 'pairs', 'A', 'B', 'B - A', '95% CI', 'A>B', 'B>A', 'p'];
  const groups = table([header, ...groupRows(c.by_type, ''), ...groupRows(c.by_subtype, '  ')]);
  const flipped = c.flipped.length
    ? table([['flipped task', 'type', 'subtype', 'A', 'B'], ...c.flipped.map((f) => [f.task_id, f.type, f.subtype, score(f.score_a), score(f.score_b)])])
    : 'no task flipped';
  const unpaired = c.unpaired.length ? `\nunpaired (scored on one side only): ${c.unpaired.map((u) => `${u.task_id} (${u.scored_in.toUpperCase()} only)`).join(', ')}` : '';
  return `${head}\n\n${groups}\n\n${flipped}${unpaired}`;
}
