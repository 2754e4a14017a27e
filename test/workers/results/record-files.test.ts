/**
 * The records' files beside a run's JSONL: an image two commits of one process write at once (the
 * same puzzle in two rows) lands whole, with no temporary left and no error (they once shared one
 * temporary name, and the second rename failed with ENOENT: the row kept without its transcript).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeAtomic } from '../../../src/workers/results/record-files.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';

afterAll(() => removeTmpDirs());

describe('writeAtomic', () => {
  it('writes one file from many concurrent writers of this process, each through a temporary of its own', async () => {
    const dir = createTmpDir('vcfleet-record-files-');
    const file = path.join(dir, 'images', 'a'.repeat(64) + '.png');
    const bytes = Buffer.alloc(256 * 1024, 7);
    await Promise.all(Array.from({ length: 20 }, () => writeAtomic(file, bytes, 'transcript')));
    expect(readFileSync(file).equals(bytes)).toBe(true);
    expect(readdirSync(path.dirname(file))).toEqual([path.basename(file)]);
  });

  it('says what waits in Redis when the folder cannot be written, and leaves no temporary', async () => {
    const dir = createTmpDir('vcfleet-record-files-');
    const blocker = path.join(dir, 'not-a-folder');
    await writeAtomic(blocker, 'x', 'trajectory');
    await expect(writeAtomic(path.join(blocker, 'f.json'), '{}', 'trajectory')).rejects.toThrow(/cannot write .*the trajectory waits in Redis/);
    expect(existsSync(path.join(blocker, 'f.json'))).toBe(false);
  });
});
