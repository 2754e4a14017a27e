/**
 * One BabyVision parquet row, checked and normalised: text columns as strings, the image as bytes
 * with a detected type, and the gold answer (a letter for `choice`, `blankAns` for `blank`).
 */
import { DataError } from '../shared/errors.ts';
import { describeMagic, detectImageMime, type ImageMime } from './image-type.ts';

/** The columns prepare reads; a file without any of them is rejected, naming the missing ones. */
export const BABYVISION_COLUMNS = [
  'taskId', 'question', 'image', 'type', 'subtype', 'ansType', 'options', 'choiceAns', 'blankAns',
] as const;

export interface BabyVisionRow {
  taskId: string;
  question: string;
  image: Uint8Array;
  imageMime: ImageMime;
  type: string;
  subtype: string;
  ansType: 'choice' | 'blank';
  /** Options of a `choice` puzzle, in order; empty for `blank`. */
  options: string[];
  /** `A`+choiceAns for `choice`, blankAns for `blank`. */
  gold: string;
  /** 0-based row number in the file, for messages. */
  rowIndex: number;
}

const decoder = new TextDecoder('utf-8', { fatal: false });

/** A text cell as a string (byte arrays without a UTF8 annotation are decoded); null when absent. */
export function cellText(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array) return decoder.decode(value);
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  return null;
}

/** An integer cell (INT32 comes back as number, INT64 as bigint); null when absent or not whole. */
export function cellInt(value: unknown): number | null {
  if (typeof value === 'bigint') return Number(value);
  if (typeof value === 'number' && Number.isInteger(value)) return value;
  return null;
}

/** Image bytes from the `{bytes, path}` struct (or a bare binary column); null when absent. */
export function cellImageBytes(value: unknown): Uint8Array | null {
  if (value instanceof Uint8Array) return value;
  if (value && typeof value === 'object' && 'bytes' in value) {
    const bytes = (value as { bytes: unknown }).bytes;
    if (bytes instanceof Uint8Array) return bytes;
  }
  return null;
}

/** The letter of a 0-based option index: 0 -> A. */
export function optionLetter(index: number): string {
  return String.fromCharCode(65 + index);
}

function rowLabel(taskId: string | null, rowIndex: number, file: string): string {
  return taskId ? `task ${taskId} (row ${rowIndex} of ${file})` : `row ${rowIndex} of ${file}`;
}

function parseOptions(value: unknown): string[] | null {
  if (value === null || value === undefined) return null;
  if (!Array.isArray(value)) return null;
  const out = value.map(cellText);
  return out.every((o): o is string => o !== null) ? out : null;
}

function parseGold(raw: Record<string, unknown>, ansType: 'choice' | 'blank', options: string[], where: string): string {
  if (ansType === 'blank') {
    const blank = cellText(raw.blankAns);
    if (blank === null || blank.trim() === '') throw new DataError(`${where}: blank answer type but no blankAns`);
    return blank.trim();
  }
  const index = cellInt(raw.choiceAns);
  if (options.length === 0) throw new DataError(`${where}: choice answer type but no options`);
  if (options.length > 26) throw new DataError(`${where}: ${options.length} options, more than letters A-Z`);
  if (index === null || index < 0 || index >= options.length) {
    throw new DataError(
      `${where}: choiceAns ${String(raw.choiceAns)} is not a valid 0-based index into its ${options.length} options`,
    );
  }
  return optionLetter(index);
}

/** Check one raw row and normalise it. Throws DataError naming the task (or row) and the problem. */
export function parseBabyVisionRow(raw: Record<string, unknown>, rowIndex: number, file: string): BabyVisionRow {
  const taskId = cellText(raw.taskId)?.trim() || null;
  const where = rowLabel(taskId, rowIndex, file);
  if (!taskId) throw new DataError(`${where}: no taskId`);
  const question = cellText(raw.question);
  if (question === null || question.trim() === '') throw new DataError(`${where}: no question text`);
  const image = cellImageBytes(raw.image);
  if (!image || image.length === 0) throw new DataError(`${where}: no image bytes`);
  const imageMime = detectImageMime(image);
  if (!imageMime) throw new DataError(`${where}: image is neither PNG nor JPEG (${describeMagic(image)})`);
  const ansType = cellText(raw.ansType);
  if (ansType !== 'choice' && ansType !== 'blank') {
    throw new DataError(`${where}: ansType ${JSON.stringify(ansType)} is neither "choice" nor "blank"`);
  }
  const options = parseOptions(raw.options) ?? [];
  if (raw.options !== null && raw.options !== undefined && !parseOptions(raw.options)) {
    throw new DataError(`${where}: options is not a list of strings`);
  }
  const gold = parseGold(raw, ansType, options, where);
  return {
    taskId,
    question,
    image,
    imageMime,
    type: cellText(raw.type) ?? '',
    subtype: cellText(raw.subtype) ?? '',
    ansType,
    options: ansType === 'choice' ? options : [],
    gold,
    rowIndex,
  };
}
