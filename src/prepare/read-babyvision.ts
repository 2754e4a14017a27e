/**
 * Read the BabyVision parquet one row group at a time, so memory holds one group's images at most.
 */
import { parquetReadObjects, parquetSchema } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { DataError, errorMessage } from '../shared/errors.ts';
import { BABYVISION_COLUMNS, parseBabyVisionRow, type BabyVisionRow } from './babyvision-row.ts';
import type { ParquetSource } from './parquet-source.ts';

/** One row group, checked. */
export interface RowBatch {
  rows: BabyVisionRow[];
  /** Rows read so far, this group included. */
  rowsDone: number;
  /** Rows in the whole file. */
  totalRows: number;
}

/** Top-level column names of the file. */
export function columnNames(source: ParquetSource): string[] {
  return parquetSchema(source.metadata).children.map((child) => child.element.name);
}

/** Throw a DataError naming every BabyVision column the file lacks. */
export function checkColumns(source: ParquetSource): void {
  const present = new Set(columnNames(source));
  const missing = BABYVISION_COLUMNS.filter((name) => !present.has(name));
  if (missing.length > 0) {
    throw new DataError(
      `parquet file ${source.path} lacks column${missing.length > 1 ? 's' : ''} ${missing.join(', ')} ` +
        `(it has: ${[...present].join(', ') || 'none'}); is it the BabyVision parquet?`,
    );
  }
}

/** Row ranges `[start, end)` of each row group, from the footer. */
export function rowGroupRanges(source: ParquetSource): Array<{ start: number; end: number }> {
  const ranges: Array<{ start: number; end: number }> = [];
  let start = 0;
  for (const group of source.metadata.row_groups) {
    const end = start + Number(group.num_rows);
    ranges.push({ start, end });
    start = end;
  }
  return ranges;
}

async function readRange(source: ParquetSource, start: number, end: number): Promise<Record<string, unknown>[]> {
  try {
    // utf8: false keeps the image bytes binary; annotated string columns still come back as strings.
    return await parquetReadObjects({
      file: source.file,
      metadata: source.metadata,
      columns: [...BABYVISION_COLUMNS],
      rowStart: start,
      rowEnd: end,
      utf8: false,
      // Every codec parquet allows (zstd, gzip, brotli, lz4), not only snappy.
      compressors,
    });
  } catch (err) {
    throw new DataError(
      `parquet file ${source.path}: cannot decode rows ${start}-${end - 1} (${errorMessage(err)}); it may be damaged`,
    );
  }
}

/** Yield the checked rows of each row group in file order. Throws DataError on the first bad row. */
export async function* readBabyVisionRows(source: ParquetSource): AsyncGenerator<RowBatch> {
  checkColumns(source);
  const totalRows = Number(source.metadata.num_rows);
  for (const { start, end } of rowGroupRanges(source)) {
    if (end === start) continue;
    const raw = await readRange(source, start, end);
    if (raw.length !== end - start) {
      throw new DataError(`parquet file ${source.path}: rows ${start}-${end - 1} decoded to ${raw.length} rows`);
    }
    const rows = raw.map((row, i) => parseBabyVisionRow(row, start + i, source.path));
    yield { rows, rowsDone: end, totalRows };
  }
}
