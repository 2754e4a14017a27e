/**
 * Rows of an output JSONL for viewing: every line that is a valid row, grouped by run, plus a
 * plain account of the lines that are not (a line cut by a crash, a foreign record). A viewer shows
 * what it can and says what it skipped, where `vcfleet metrics` stops at the first bad line.
 */
import { RowSchema, type Row } from '../shared/rows.ts';

/** Problems listed per file at most; the rest are counted. */
const MAX_PROBLEMS = 20;

export interface RunRows {
  rows: Row[];
  /** Rollouts that appear on more than one line of the run (the last line stands). */
  duplicates: string[];
}

export interface ParsedRows {
  /** Rows by run id, in the order runs first appear in the file. */
  runs: Map<string, RunRows>;
  /** Lines that are not valid rows, for people ("results/x.jsonl line 7: not JSON"). */
  problems: string[];
}

function lineProblem(line: string): string | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return 'not JSON (a line cut short?)';
  }
  const parsed = RowSchema.safeParse(value);
  if (parsed.success) return null;
  const issue = parsed.error.issues[0];
  return `not a valid row (${issue.path.join('.') || 'the line'}: ${issue.message})`;
}

/** Parse the text of an output JSONL; `file` only names it in problems. */
export function parseRowLines(text: string, file: string): ParsedRows {
  const runs = new Map<string, RunRows>();
  const indexes = new Map<string, Map<string, number>>();
  const problems: string[] = [];
  let skipped = 0;
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    const problem = lineProblem(line);
    if (problem !== null) {
      skipped++;
      if (problems.length < MAX_PROBLEMS) problems.push(`${file} line ${i + 1}: ${problem}; skipped`);
      return;
    }
    const row = RowSchema.parse(JSON.parse(line));
    let run = runs.get(row.run_id);
    let index = indexes.get(row.run_id);
    if (!run || !index) {
      runs.set(row.run_id, (run = { rows: [], duplicates: [] }));
      indexes.set(row.run_id, (index = new Map()));
    }
    const at = index.get(row.rollout_id);
    if (at === undefined) {
      index.set(row.rollout_id, run.rows.length);
      run.rows.push(row);
    } else {
      run.rows[at] = row;
      run.duplicates.push(row.rollout_id);
    }
  });
  if (skipped > problems.length) problems.push(`${file}: ${skipped - problems.length} more lines skipped`);
  return { runs, problems };
}
