/**
 * A BabyVision-shaped parquet for tests, written with hyparquet-writer: the real column names and
 * shapes (`image` a struct {bytes, path}, `options` a list of strings, `choiceAns` INT64), both
 * answer types, PNG and JPEG images (some shared by several rows), four types with subtypes, and
 * several row groups.
 *
 *   const fx = writeFixtureParquet(file);                        // 10 good rows, groups of 4
 *   writeFixtureParquet(file, { omitColumns: ['blankAns'] });     // a file missing a column
 *   writeFixtureParquet(file, { mutate: (rows) => { rows[2].image = null; return rows; } });
 */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { parquetWriteBuffer } from 'hyparquet-writer';
import type { SchemaElement } from 'hyparquet';
import { gzipSync } from 'node:zlib';
import { fixtureJpeg, fixturePng } from './fixture-images.ts';

/** One row as written; every field may be set to null (or changed) by `mutate` to make bad input. */
export interface FixtureRow {
  taskId: string | null;
  question: string | null;
  image: { bytes: Uint8Array | null; path: string | null } | null;
  type: string | null;
  subtype: string | null;
  ansType: string | null;
  options: string[] | null;
  /** 0-based index of the right option; written as INT64. */
  choiceAns: number | null;
  blankAns: string | null;
}

/** What prepare should make of a row (computed from the rows after `mutate`). */
export interface ExpectedTask {
  task_id: string;
  /** The raw question, without options. */
  question: string;
  gold: string;
  type: string;
  subtype: string;
  ans_type: 'choice' | 'blank';
  options: string[];
  image_mime: 'image/png' | 'image/jpeg';
  image_sha256: string;
}

export interface FixtureOptions {
  /** Number of rows; default 10. */
  rows?: number;
  /** Rows per row group; default 4 (so 10 rows make 3 groups). */
  rowGroupSize?: number;
  /** Change the generated rows before writing (make a bad row, duplicate an id, ...). */
  mutate?: (rows: FixtureRow[]) => FixtureRow[];
  /** Leave these columns out of the file. */
  omitColumns?: string[];
  /** Compression of every column; default SNAPPY. GZIP is written with node:zlib. */
  codec?: 'SNAPPY' | 'UNCOMPRESSED' | 'GZIP';
}

export interface Fixture {
  path: string;
  rows: FixtureRow[];
  expected: ExpectedTask[];
  /** Distinct images among the rows. */
  numImages: number;
  /** SHA-256 of the written file. */
  sha256: string;
}

export const FIXTURE_COLUMNS = [
  'taskId', 'question', 'image', 'type', 'subtype', 'ansType', 'options', 'choiceAns', 'blankAns',
] as const;

const TYPES: ReadonlyArray<[string, string]> = [
  ['Fine-grained Discrimination', 'Find the Different'],
  ['Visual Tracking', 'Maze'],
  ['Spatial Perception', 'Cube Counting'],
  ['Visual Pattern Recognition', 'Rotation Pattern'],
  ['Fine-grained Discrimination', 'Count Same Shapes'],
];

/** The generated good rows: every third row (from the second) is `blank`, the rest `choice`. */
export function fixtureRows(count: number): FixtureRow[] {
  return Array.from({ length: count }, (_, i): FixtureRow => {
    const [type, subtype] = TYPES[i % TYPES.length];
    const jpeg = i % 4 === 3;
    const bytes = jpeg ? fixtureJpeg(`v${Math.floor(i / 4) % 2}`) : fixturePng(i % 5);
    const blank = i % 3 === 1;
    return {
      taskId: `bv-${String(i + 1).padStart(3, '0')}`,
      question: `Puzzle ${i + 1}: ${blank ? 'how many dots are in the picture?' : 'which option matches the picture?'}`,
      image: { bytes, path: `img_${i}.${jpeg ? 'jpg' : 'png'}` },
      type,
      subtype,
      ansType: blank ? 'blank' : 'choice',
      options: blank ? (i % 2 === 0 ? [] : null) : ['red square', 'blue circle', 'green star', 'yellow line'],
      choiceAns: blank ? null : i % 4,
      blankAns: blank ? String(i + 2) : null,
    };
  });
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

function expectedTask(row: FixtureRow): ExpectedTask {
  const bytes = row.image?.bytes ?? new Uint8Array();
  const choice = row.ansType === 'choice';
  return {
    task_id: row.taskId ?? '',
    question: row.question ?? '',
    gold: choice ? String.fromCharCode(65 + (row.choiceAns ?? 0)) : (row.blankAns ?? ''),
    type: row.type ?? '',
    subtype: row.subtype ?? '',
    ans_type: choice ? 'choice' : 'blank',
    options: choice ? (row.options ?? []) : [],
    image_mime: bytes[0] === 0xff ? 'image/jpeg' : 'image/png',
    image_sha256: sha256(bytes),
  };
}

const utf8 = (name: string): SchemaElement => ({ name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' });

/** Schema elements of each column, as pyarrow writes a Hugging Face `datasets` parquet. */
const COLUMN_SCHEMA: Record<string, SchemaElement[]> = {
  taskId: [utf8('taskId')],
  question: [utf8('question')],
  image: [
    { name: 'image', repetition_type: 'OPTIONAL', num_children: 2 },
    { name: 'bytes', type: 'BYTE_ARRAY', repetition_type: 'OPTIONAL' },
    utf8('path'),
  ],
  type: [utf8('type')],
  subtype: [utf8('subtype')],
  ansType: [utf8('ansType')],
  options: [
    { name: 'options', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
    { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
    utf8('element'),
  ],
  choiceAns: [{ name: 'choiceAns', type: 'INT64', repetition_type: 'OPTIONAL' }],
  blankAns: [utf8('blankAns')],
};

function columnData(name: string, rows: FixtureRow[]): unknown[] {
  if (name === 'choiceAns') return rows.map((r) => (r.choiceAns === null ? null : BigInt(r.choiceAns)));
  return rows.map((r) => r[name as keyof FixtureRow] ?? null);
}

/** Write the fixture parquet to `filePath` (synchronously) and describe what it holds. */
export function writeFixtureParquet(filePath: string, options: FixtureOptions = {}): Fixture {
  const generated = fixtureRows(options.rows ?? 10);
  const rows = options.mutate ? options.mutate(generated) : generated;
  const columns = FIXTURE_COLUMNS.filter((c) => !(options.omitColumns ?? []).includes(c));
  const schema: SchemaElement[] = [{ name: 'root', num_children: columns.length }, ...columns.flatMap((c) => COLUMN_SCHEMA[c])];
  const buffer = parquetWriteBuffer({
    columnData: columns.map((name) => ({ name, data: columnData(name, rows) as never })),
    schema,
    rowGroupSize: options.rowGroupSize ?? 4,
    codec: options.codec ?? 'SNAPPY',
    compressors: { GZIP: (bytes: Uint8Array) => new Uint8Array(gzipSync(bytes)) },
  });
  const bytes = new Uint8Array(buffer);
  writeFileSync(filePath, bytes);
  const expected = rows.map(expectedTask);
  return { path: filePath, rows, expected, numImages: new Set(expected.map((e) => e.image_sha256)).size, sha256: sha256(bytes) };
}
