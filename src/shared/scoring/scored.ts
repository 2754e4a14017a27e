/**
 * Scored or masked: the one decision, for the writer, the metrics, the viewer (its browser code
 * too: this file imports nothing) and the CLI.
 */

/** A masked row is not a score (a judge or infrastructure failure): left out of every mean. */
export function isMasked(row: { failure_kind: string | null }): boolean {
  return row.failure_kind !== null;
}

/** Whether a row counts in the means: it has a reward, and it is not masked. */
export function isScored(row: { failure_kind: string | null; reward: number | null }): boolean {
  return row.reward !== null && !isMasked(row);
}
