/**
 * The streamed line reader of row files (shared/output/jsonl-lines.ts) on real files: lines across
 * read chunks, blank lines, a last line without a newline, multi-byte characters split between
 * chunks, and lines past the bound that come back as `tooLong` without their bytes.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { jsonlLines, type JsonlLine } from '../../../src/shared/output/jsonl-lines.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';

async function lines(text: string, max: number): Promise<JsonlLine[]> {
  const file = path.join(createTmpDir('vcfleet-lines-'), 'f.jsonl');
  writeFileSync(file, text);
  const out: JsonlLine[] = [];
  for await (const l of jsonlLines(file, max)) out.push(l);
  return out;
}

describe('jsonlLines', () => {
  afterAll(() => removeTmpDirs());

  it('gives each non-empty line with its number, across chunks, with or without a last newline', async () => {
    const long = `{"a":"${'é'.repeat(50_000)}"}`; // 100 KB of two-byte characters: spans the 64 KiB chunks
    expect(await lines(`one\n\n  \n${long}\nlast`, 1 << 20)).toEqual([{ lineNo: 1, text: 'one' }, { lineNo: 4, text: long }, { lineNo: 5, text: 'last' }]);
    expect(await lines('a\nb\n', 10)).toEqual([{ lineNo: 1, text: 'a' }, { lineNo: 2, text: 'b' }]);
  });

  it('drops a line past the bound (its length only) and goes on with the next', async () => {
    const big = 'x'.repeat(200_000);
    expect(await lines(`ok\n${big}\nnext\n${'y'.repeat(11)}`, 10)).toEqual([
      { lineNo: 1, text: 'ok' }, { lineNo: 2, tooLong: 200_000 }, { lineNo: 3, text: 'next' }, { lineNo: 4, tooLong: 11 },
    ]);
    expect(await lines('0123456789\n', 10)).toEqual([{ lineNo: 1, text: '0123456789' }]);
  });
});
