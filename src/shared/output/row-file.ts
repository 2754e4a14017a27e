/**
 * The one reader of output JSONL files: every line that is a valid row, grouped by run, plus a
 * plain account of the lines that are not (a line cut by a crash, a foreign record) and whether the
 * last line was cut. The viewer shows what it can and says what it skipped; `vcfleet metrics` stops
 * at the first bad line; the results consumer rewrites a damaged file from Redis; `vcfleet export`
 * reads its lines with `parseRowLine`. Lines are read one at a time (jsonl-lines.ts).
 */
import { DataError } from '../errors.ts';
import { ROW_VERSION, RowSchema, type Row } from '../records/rows.ts';
import { jsonlLines } from './jsonl-lines.ts';

/** Problems a reader of rows lists at most (per file, per export); the rest are counted. */
export const MAX_PROBLEMS = 20;

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
  /** The file does not end with a newline: its last line was being written or was cut. */
  cutTail: boolean;
}

/** A line of an output JSONL as a row, or why it is not one ("not JSON (a line cut short?)"). */
export function parseRowLine(text: string): { row: Row } | { problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { problem: 'not JSON (a line cut short?)' };
  }
  const version = value !== null && typeof value === 'object' ? (value as { row_version?: unknown }).row_version : undefined;
  if (typeof version === 'number' && version > ROW_VERSION) {
    return { problem: `a row of row version ${version}, newer than this vcfleet reads (${ROW_VERSION}): read it with a newer vcfleet` };
  }
  const parsed = RowSchema.safeParse(value);
  if (parsed.success) return { row: parsed.data };
  const issue = parsed.error.issues[0];
  return { problem: `not a valid row (${issue.path.join('.') || 'the line'}: ${issue.message})` };
}

/** Parse an output JSONL, a line at a time; `file` names it in problems. Read errors are thrown as they come. */
export function parseRowFile(file: string): ParsedRows {
  const runs = new Map<string, RunRows>();
  const indexes = new Map<string, Map<string, number>>();
  const problems: string[] = [];
  let skipped = 0;
  const lines = jsonlLines(file);
  let next = lines.next();
  for (; !next.done; next = lines.next()) {
    const line = next.value;
    // These readers set no bound on a line (they never did), so none comes back too long.
    const parsed = 'text' in line ? parseRowLine(line.text) : { problem: `${line.tooLong} bytes long` };
    if ('problem' in parsed) {
      skipped++;
      if (problems.length < MAX_PROBLEMS) problems.push(`${file} line ${line.lineNo}: ${parsed.problem}; skipped`);
      continue;
    }
    const { row } = parsed;
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
  }
  if (skipped > problems.length) problems.push(`${file}: ${skipped - problems.length} more lines skipped`);
  return { runs, problems, cutTail: next.value.cutTail };
}

/** Read and parse an output JSONL (an empty result when it does not exist). */
export function readRowFile(file: string): ParsedRows {
  try {
    return parseRowFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { runs: new Map(), problems: [], cutTail: false };
    throw new DataError(`cannot read ${file}: ${(err as Error).message}`);
  }
}

/**
 * The rows of an output JSONL by run id (in the order runs first appear), refusing a file with a bad
 * line or the same rollout twice.
 */
export function readRunsStrict(file: string): Map<string, Row[]> {
  const parsed = readRowFile(file);
  if (parsed.problems.length > 0) throw new DataError(`${parsed.problems[0]}: fix or remove that line`);
  const runs = new Map<string, Row[]>();
  for (const [runId, run] of parsed.runs) {
    if (run.duplicates.length) throw new DataError(`${file} holds rollout ${run.duplicates[0]} of run ${runId} twice`);
    runs.set(runId, run.rows);
  }
  return runs;
}

/** Every row of an output JSONL, refusing a file with a bad line or the same rollout twice. */
export function readRowsStrict(file: string): Row[] {
  return [...readRunsStrict(file).values()].flat();
}
