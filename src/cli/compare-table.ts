/** The text of `vcfleet compare`: the headline figures, then per type and per subtype, the flips and the unpaired tasks. */
import type { Comparison, ComparisonFigures } from '../shared/output/compare-runs.ts';
import { percent } from './metrics-table.ts';
import { table } from './runtime.ts';

/** A difference in percentage points with its sign: `+3.2 pp`. */
function points(x: number | null): string {
  if (x === null) return '-';
  const v = 100 * x;
  return `${v > 0 ? '+' : v < 0 ? '-' : '±'}${Math.abs(v).toFixed(1)} pp`;
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

export function comparisonText(c: Comparison): string {
  const test = c.p_method === 'mcnemar_exact' ? "McNemar's exact p" : 'sign test p (repeats: per-task mean rewards)';
  const head = table([
    ['A', `${c.a.name} (run ${c.a.run_id}, ${c.a.benchmark})`],
    ['B', `${c.b.name} (run ${c.b.run_id}, ${c.b.benchmark})`],
    ['paired tasks', `${c.pairs}${c.unpaired.length ? ` (${c.unpaired.length} unpaired, left out)` : ''}`],
    ['accuracy A / B', `${percent(c.accuracy_a)} / ${percent(c.accuracy_b)}`],
    ['B - A', `${points(c.difference)}  95% CI ${ci(c.difference_ci95)} (paired bootstrap over tasks)`],
    ['flips', `A right, B wrong ${c.a_right_b_wrong}; A wrong, B right ${c.a_wrong_b_right}`],
    [test, p(c.mcnemar_p)],
  ]);
  const header = ['', 'pairs', 'A', 'B', 'B - A', '95% CI', 'A>B', 'B>A', 'p'];
  const groups = table([header, ...groupRows(c.by_type, ''), ...groupRows(c.by_subtype, '  ')]);
  const flips = c.flipped.length
    ? table([['flipped task', 'type', 'subtype', 'A', 'B'], ...c.flipped.map((f) => [f.task_id, f.type, f.subtype, f.score_a, f.score_b])])
    : 'no task flipped';
  const unpaired = c.unpaired.length ? `\nunpaired (scored on one side only): ${c.unpaired.map((u) => `${u.task_id} (${u.scored_in.toUpperCase()} only)`).join(', ')}` : '';
  return `${head}\n\n${groups}\n\n${flips}${unpaired}`;
}
