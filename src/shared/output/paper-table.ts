/**
 * The BabyVision paper's table: accuracy overall, per type and per subtype, each as the mean and the
 * population standard deviation (numpy's default, as the official scorer) over passes. A pass is the
 * rollouts of one repeat index, and every one of them is in its denominator: a masked or unfinished
 * rollout counts as wrong, as a failed call does in the official scorer. Pure, and kept row by row
 * (a row is added, or taken away when a later row replaces it) like the rest of the metrics; this
 * file imports nothing, so the viewer's browser code formats cells with it too.
 */

/** One cell of the table: fractions in [0, 1]; `per_pass[r]` is null when pass r has no rollout in the group. */
export interface PaperCell {
  mean: number | null;
  std: number | null;
  per_pass: Array<number | null>;
}

export interface PaperTable {
  passes: number;
  overall: PaperCell;
  by_type: Record<string, PaperCell>;
  by_subtype: Record<string, PaperCell>;
  /** Rollouts in the table, and those of them masked (counted wrong); absent in metrics of older versions. */
  rollouts?: number;
  masked?: number;
}

/** What the table needs of a row. */
export interface PaperRow {
  repeat: number;
  type: string;
  subtype: string;
  reward: number | null;
  failure_kind: string | null;
}

interface PassCount {
  rollouts: number;
  correct: number;
}

const round = (x: number | null): number | null => (x === null ? null : Math.round(x * 1e6) / 1e6);

/** Mean and population std of the passes that have rollouts; `per_pass` keeps every pass. */
export function paperCell(perPass: ReadonlyArray<number | null>): PaperCell {
  const present = perPass.filter((v): v is number => v !== null);
  if (present.length === 0) return { mean: null, std: null, per_pass: perPass.map(round) };
  const mean = present.reduce((a, b) => a + b, 0) / present.length;
  const std = Math.sqrt(present.reduce((a, v) => a + (v - mean) ** 2, 0) / present.length);
  return { mean: round(mean), std: round(std), per_pass: perPass.map(round) };
}

/** A correct rollout: reward 1 and not masked. Everything else in the pass is wrong. */
const correct = (row: PaperRow): boolean => row.reward === 1 && row.failure_kind === null;

/** The paper's table kept row by row: counts per (group, pass), so state grows with groups and passes only. */
export class PaperTableAccumulator {
  /** `group` -> `repeat` -> counts; groups are `""` (overall), `t:<type>`, `s:<subtype>`. */
  private readonly counts = new Map<string, Map<number, PassCount>>();
  private readonly all = { rollouts: 0, masked: 0 };

  add(row: PaperRow): void {
    this.apply(row, 1);
  }

  remove(row: PaperRow): void {
    this.apply(row, -1);
  }

  private apply(row: PaperRow, sign: 1 | -1): void {
    this.all.rollouts += sign;
    if (row.failure_kind !== null) this.all.masked += sign;
    for (const group of ['', `t:${row.type}`, `s:${row.subtype}`]) {
      let passes = this.counts.get(group);
      if (!passes) this.counts.set(group, (passes = new Map()));
      let c = passes.get(row.repeat);
      if (!c) passes.set(row.repeat, (c = { rollouts: 0, correct: 0 }));
      c.rollouts += sign;
      if (correct(row)) c.correct += sign;
      if (c.rollouts === 0) passes.delete(row.repeat);
      if (passes.size === 0) this.counts.delete(group);
    }
  }

  /** The table over `passes` passes (the run's repeats; at least the passes that have rows). */
  result(passes: number): PaperTable {
    const seen = Math.max(passes, ...[...(this.counts.get('')?.keys() ?? [])].map((r) => r + 1));
    const cell = (group: string): PaperCell => {
      const byPass = this.counts.get(group);
      const perPass = Array.from({ length: seen }, (_, r) => {
        const c = byPass?.get(r);
        return c ? c.correct / c.rollouts : null;
      });
      return paperCell(perPass);
    };
    const groups = (prefix: string): Record<string, PaperCell> => {
      const names = [...this.counts.keys()].filter((g) => g.startsWith(prefix)).map((g) => g.slice(prefix.length));
      return Object.fromEntries(names.sort((a, b) => a.localeCompare(b)).map((n) => [n, cell(prefix + n)]));
    };
    return { passes: seen, overall: cell(''), by_type: groups('t:'), by_subtype: groups('s:'), rollouts: this.all.rollouts, masked: this.all.masked };
  }
}

/** The table of a run's rows, from scratch. */
export function paperTable(rows: Iterable<PaperRow>, passes = 1): PaperTable {
  const acc = new PaperTableAccumulator();
  for (const row of rows) acc.add(row);
  return acc.result(passes);
}

/** A cell as the paper prints it: percent, one decimal, `49.7 ± 1.2`; `-` when the group has no rollout. */
export function paperCellText(cell: Pick<PaperCell, 'mean' | 'std'> | undefined): string {
  if (!cell || cell.mean === null) return '-';
  return `${(100 * cell.mean).toFixed(1)} ± ${(100 * (cell.std ?? 0)).toFixed(1)}`;
}

/** What the overall line says of masked rollouts (counted wrong): every one masked is no score at all. */
function maskedNote(t: Pick<PaperTable, 'rollouts' | 'masked'>): string {
  const { rollouts = 0, masked = 0 } = t;
  if (rollouts === 0 || masked === 0) return '';
  if (masked === rollouts) return `  (every rollout masked, all ${rollouts}: nothing was scored, this is no score)`;
  return `  (${masked} of ${rollouts} rollouts masked, counted wrong)`;
}

/**
 * The table as lines of label and value: overall, the types, then the subtypes (indented), as the
 * paper orders them. `label` names the first line (the policy model, say).
 */
export function paperTableLines(t: PaperTable, label = 'overall'): Array<[string, string]> {
  return [
    [label, `${paperCellText(t.overall)}${maskedNote(t)}`],
    ...Object.entries(t.by_type).map(([k, c]): [string, string] => [`  ${k}`, paperCellText(c)]),
    ...Object.entries(t.by_subtype).map(([k, c]): [string, string] => [`    ${k}`, paperCellText(c)]),
  ];
}
