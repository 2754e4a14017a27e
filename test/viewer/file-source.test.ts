/**
 * The viewer's file source over a generated output folder: rows grouped by run, metrics equal to
 * `aggregateMetrics`, bad lines reported and skipped, a file that grows read again, and every way a
 * transcript or an image can be asked for that must not read outside the transcripts folder.
 */
import { appendFileSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DataError } from '../../src/shared/errors.ts';
import { safeFileStem } from '../../src/shared/records/transcript.ts';
import { createFileSource } from '../../src/viewer/file-source.ts';
import { aggregateMetrics, metricsPathFor } from '../../src/shared/output/metrics.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { writeViewerFixture, type FixtureRun } from '../helpers/viewer-fixture.ts';

const RUNS: FixtureRun[] = [
  {
    runId: 'r1',
    rollouts: [
      { task_id: 't1', repeat: 0, type: 'A', subtype: 'a1', outcome: 'correct', script: 'crop' },
      { task_id: 't1', repeat: 1, type: 'A', subtype: 'a1', outcome: 'wrong' },
      { task_id: 't2', repeat: 0, type: 'B', subtype: 'b1', outcome: 'judge_failed', transcript: 'missing' },
      { task_id: 't2', repeat: 1, type: 'B', subtype: 'b1', outcome: 'infra_failed', transcript: 'none' },
    ],
  },
  { runId: 'r2', rollouts: [{ task_id: 't9', repeat: 0, type: 'A', subtype: 'a1', outcome: 'correct' }] },
];

afterEach(() => removeTmpDirs());

describe('createFileSource', () => {
  it('groups the rows of a file by run and computes each run its metrics', async () => {
    const f = writeViewerFixture(createTmpDir(), RUNS);
    const source = createFileSource(f.jsonl);
    const runs = await source.runs();
    expect(runs.map((r) => [r.run_id, r.rollouts, r.scored, r.correct])).toEqual(expect.arrayContaining([['r1', 4, 2, 1], ['r2', 1, 1, 1]]));
    const r1 = await source.run('r1');
    expect(r1?.rows.map((r) => r.rollout_id)).toEqual(['r1-t1-0', 'r1-t1-1', 'r1-t2-0', 'r1-t2-1']);
    expect(r1?.metrics).toEqual(aggregateMetrics(f.rows.filter((r) => r.run_id === 'r1'), 2));
    expect(r1?.meta).toMatchObject({ run_id: 'r1', num_repeats: 2, judge_model: 'judge-model', origin: f.jsonl, problems: [] });
    expect(await source.run('nope')).toBeNull();
  });

  it('takes the number of repeats from the metrics file of the same run only', async () => {
    const f = writeViewerFixture(createTmpDir(), RUNS);
    writeFileSync(metricsPathFor(f.jsonl), JSON.stringify({ run_id: 'r1', num_repeats: 5 }));
    const source = createFileSource(f.jsonl);
    expect((await source.run('r1'))?.meta.num_repeats).toBe(5);
    expect((await source.run('r1'))?.metrics['pass@k']).toHaveProperty('pass@5');
    expect((await source.run('r2'))?.meta.num_repeats).toBe(1);
  });

  it('skips lines that are not rows and says which, and reads the file again when it grows', async () => {
    const f = writeViewerFixture(createTmpDir(), RUNS);
    const source = createFileSource(f.jsonl);
    expect((await source.run('r1'))?.rows).toHaveLength(4);
    const extra = { ...f.rows[0], rollout_id: 'r1-t3-0', task_id: 't3' };
    appendFileSync(f.jsonl, `{"run_id": "r1", "oops": true}\n${JSON.stringify(extra)}\n${JSON.stringify(f.rows[1])}\n{"cut`);
    const r1 = await source.run('r1');
    expect(r1?.rows.map((r) => r.rollout_id)).toContain('r1-t3-0');
    expect(r1?.rows).toHaveLength(5);
    expect(r1?.meta.problems).toEqual([
      `${f.jsonl} line 6: not a valid row (rollout_id: Invalid input: expected string, received undefined); skipped`,
      `${f.jsonl} line 9: not JSON (a line cut short?); skipped`,
      'rollouts on more than one line (the last line stands): 1, e.g. r1-t1-1',
    ]);
  });

  it('throws a DataError naming the file when it cannot be read', () => {
    const missing = path.join(createTmpDir(), 'none.jsonl');
    expect(() => createFileSource(missing)).toThrow(DataError);
    expect(() => createFileSource(missing)).toThrow(missing);
  });
});

describe('transcripts and images', () => {
  it('finds kept transcripts, and says when one is missing (naming the path) or was not kept', async () => {
    const f = writeViewerFixture(createTmpDir(), RUNS);
    const source = createFileSource(f.jsonl);
    const kept = await source.rollout('r1', 'r1-t1-0');
    expect(kept?.transcript.status).toBe('found');
    if (kept?.transcript.status === 'found') expect(kept.transcript.record.turns[1].tool_calls[0].images).toEqual([f.cropSha]);
    expect((await source.rollout('r1', 'r1-t2-0'))?.transcript).toEqual({ status: 'missing', looked_for: path.join(f.transcriptsDir, 'r1-t2-0.json') });
    expect((await source.rollout('r1', 'r1-t2-1'))?.transcript).toEqual({ status: 'not_kept' });
    // Rollouts are looked up among the rows: ids of another run, or path text, find nothing.
    expect(await source.rollout('r2', 'r1-t1-0')).toBeNull();
    expect(await source.rollout('r1', '../run.jsonl')).toBeNull();
  });

  it('reads no transcript outside its folder, nor one that belongs to another rollout', async () => {
    const dir = createTmpDir();
    const f = writeViewerFixture(dir, RUNS);
    writeFileSync(path.join(dir, 'secret.json'), '{"transcript_version": 1}');
    const outside = { ...f.rows[0], rollout_id: 'r1-out', transcript: 'run_transcripts/../secret.json' };
    const sneaky = { ...f.rows[0], rollout_id: 'r1-link', transcript: 'run_transcripts/r1-link.json' };
    symlinkSync(path.join(dir, 'secret.json'), path.join(f.transcriptsDir, 'r1-link.json'));
    const other = { ...f.rows[0], rollout_id: 'r1-other', transcript: `run_transcripts/${safeFileStem('r1-t1-1')}.json` };
    const broken = { ...f.rows[0], rollout_id: 'r1-broken', transcript: 'run_transcripts/r1-broken.json' };
    writeFileSync(path.join(f.transcriptsDir, 'r1-broken.json'), '{"transcript_version": 1, "run_id": "r1"}');
    appendFileSync(f.jsonl, [outside, sneaky, other, broken].map((r) => `${JSON.stringify(r)}\n`).join(''));
    const source = createFileSource(f.jsonl);
    const lookup = async (id: string) => (await source.rollout('r1', id))?.transcript;
    expect(await lookup('r1-out')).toMatchObject({ status: 'unreadable', problem: expect.stringContaining(`not a .json file directly in ${f.transcriptsDir}`) });
    expect(await lookup('r1-link')).toMatchObject({ status: 'unreadable', problem: expect.stringContaining('leads outside') });
    expect(await lookup('r1-other')).toMatchObject({ status: 'unreadable', problem: 'holds rollout r1-t1-1 of run r1, not this rollout' });
    expect(await lookup('r1-broken')).toMatchObject({ status: 'unreadable', problem: expect.stringMatching(/^not a transcript record \(rollout_id: /) });
  });

  it('serves images by SHA-256 only, from the images folder only', async () => {
    const dir = createTmpDir();
    const f = writeViewerFixture(dir, RUNS);
    const source = createFileSource(f.jsonl);
    const crop = await source.image(f.cropSha);
    expect(crop && Buffer.from(crop).subarray(1, 4).toString()).toBe('PNG');
    expect(await source.image('0'.repeat(64))).toBeNull();
    expect(await source.image(f.cropSha.toUpperCase())).toBeNull();
    expect(await source.image('../../run.jsonl')).toBeNull();
    // A link in the images folder that leads elsewhere is not followed.
    mkdirSync(path.join(dir, 'elsewhere'));
    writeFileSync(path.join(dir, 'elsewhere', 'x.png'), 'not yours');
    const linked = 'a'.repeat(64);
    symlinkSync(path.join(dir, 'elsewhere', 'x.png'), path.join(f.imagesDir, `${linked}.png`));
    expect(await source.image(linked)).toBeNull();
  });
});
