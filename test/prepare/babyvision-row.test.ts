import { describe, expect, it } from 'vitest';
import { DataError } from '../../src/shared/errors.ts';
import { cellInt, cellText, optionLetter, parseBabyVisionRow } from '../../src/prepare/babyvision-row.ts';
import { detectImageMime } from '../../src/prepare/image-type.ts';
import { FIXTURE_JPEG, fixturePng } from '../helpers/fixture-images.ts';

const png = fixturePng(1);

function row(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    taskId: 't1', question: 'Which one?', image: { bytes: png, path: 'x.jpg' }, type: 'Visual Tracking',
    subtype: 'Maze', ansType: 'choice', options: ['a', 'b', 'c'], choiceAns: 2n, blankAns: null, ...overrides,
  };
}

function parseError(raw: Record<string, unknown>): string {
  try {
    parseBabyVisionRow(raw, 5, 'f.parquet');
  } catch (err) {
    expect(err).toBeInstanceOf(DataError);
    return (err as Error).message;
  }
  throw new Error('expected a DataError');
}

describe('image type from magic bytes', () => {
  it('detects PNG and JPEG regardless of the stored path', () => {
    expect(detectImageMime(png)).toBe('image/png');
    expect(detectImageMime(FIXTURE_JPEG)).toBe('image/jpeg');
    expect(detectImageMime(new TextEncoder().encode('GIF89a....'))).toBeNull();
    expect(detectImageMime(new Uint8Array())).toBeNull();
  });
});

describe('cell conversion', () => {
  it('reads INT32, INT64 and integral doubles as numbers', () => {
    expect(cellInt(3)).toBe(3);
    expect(cellInt(3n)).toBe(3);
    expect(cellInt(3.0)).toBe(3);
    expect(cellInt(Number.NaN)).toBeNull();
    expect(cellInt(null)).toBeNull();
  });
  it('decodes unannotated byte arrays as text', () => {
    expect(cellText(new TextEncoder().encode('héllo'))).toBe('héllo');
    expect(cellText(undefined)).toBeNull();
  });
  it('letters options from A', () => {
    expect([0, 1, 25].map(optionLetter)).toEqual(['A', 'B', 'Z']);
  });
});

describe('parseBabyVisionRow', () => {
  it('gives a choice row the letter of choiceAns and keeps its options', () => {
    const parsed = parseBabyVisionRow(row(), 0, 'f.parquet');
    expect(parsed).toMatchObject({ taskId: 't1', gold: 'C', ansType: 'choice', options: ['a', 'b', 'c'], imageMime: 'image/png' });
  });
  it('gives a blank row its blankAns and no options', () => {
    const parsed = parseBabyVisionRow(row({ ansType: 'blank', blankAns: ' 12 ', choiceAns: null, options: [] }), 0, 'f');
    expect(parsed).toMatchObject({ gold: '12', ansType: 'blank', options: [] });
  });
  it('accepts a bare binary image column', () => {
    expect(parseBabyVisionRow(row({ image: FIXTURE_JPEG }), 0, 'f').imageMime).toBe('image/jpeg');
  });
  it('rejects bad rows, naming the task and the problem', () => {
    expect(parseError(row({ image: { bytes: null, path: 'a.png' } }))).toMatch(/task t1 \(row 5 of f\.parquet\): no image bytes/);
    expect(parseError(row({ image: null }))).toMatch(/no image bytes/);
    expect(parseError(row({ image: { bytes: new TextEncoder().encode('hello'), path: 'a.png' } }))).toMatch(
      /task t1.*neither PNG nor JPEG \(starts with 68 65 6c 6c 6f\)/,
    );
    expect(parseError(row({ choiceAns: 3n }))).toMatch(/task t1.*choiceAns 3 is not a valid 0-based index into its 3 options/);
    expect(parseError(row({ choiceAns: null }))).toMatch(/choiceAns null/);
    expect(parseError(row({ choiceAns: -1 }))).toMatch(/choiceAns -1/);
    expect(parseError(row({ options: [] }))).toMatch(/choice answer type but no options/);
    expect(parseError(row({ ansType: 'blank', blankAns: '  ' }))).toMatch(/task t1.*blank answer type but no blankAns/);
    expect(parseError(row({ ansType: 'open' }))).toMatch(/ansType "open"/);
    expect(parseError(row({ taskId: null }))).toMatch(/^row 5 of f\.parquet: no taskId/);
    expect(parseError(row({ question: '' }))).toMatch(/no question text/);
  });
});
