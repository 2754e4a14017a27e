/** The viewer source over several output files: every file's runs, each run served from the first file that holds it. */
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createFilesSource } from '../../src/viewer/files-source.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { writeViewerFixture } from '../helpers/viewer-fixture.ts';

afterEach(() => removeTmpDirs());

describe('createFilesSource', () => {
  it('lists the runs of every file once and serves each run, rollout and image from the file that holds it', async () => {
    const dir = createTmpDir();
    const one = [{ task_id: '1', type: 'A', subtype: 'a', outcome: 'correct' as const }];
    const a = writeViewerFixture(path.join(dir, 'a'), [{ runId: 'run-a', rollouts: one }, { runId: 'shared', rollouts: one }], { stem: 'a' });
    const b = writeViewerFixture(path.join(dir, 'b'), [{ runId: 'run-b', rollouts: [...one, { task_id: '2', type: 'A', subtype: 'a', outcome: 'wrong' as const }] }, { runId: 'shared', rollouts: [] }], { stem: 'b' });
    const source = createFilesSource([a.jsonl, b.jsonl]);
    expect((await source.runs()).map((r) => r.run_id).sort()).toEqual(['run-a', 'run-b', 'shared']);
    expect((await source.run('run-b'))?.meta.origin).toBe(b.jsonl);
    expect((await source.run('shared'))?.meta.origin).toBe(a.jsonl);
    expect((await source.run('run-b'))?.rows).toHaveLength(2);
    expect(await source.run('nope')).toBeNull();
    const row = (await source.run('run-b'))!.rows[0];
    expect((await source.rollout('run-b', row.rollout_id))?.row.rollout_id).toBe(row.rollout_id);
    expect(await source.rollout('run-a', row.rollout_id)).toBeNull();
  });
});
