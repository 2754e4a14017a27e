/**
 * The dashboard's viewer source over a real Redis: a run whose rows are in Redis and whose output
 * folder is on this host gives the same rows, metrics and run list as the file source over that
 * folder; transcripts are found, missing (naming the path looked for, also when this host resolves
 * the output elsewhere), not kept, or refused (a path outside this host's output root); ids from URLs
 * find only runs and rollouts Redis holds; images come from the transcripts folder, else from the
 * puzzle blobs (checked by SHA-256); a run with no row yet is listed and drawn empty.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisViewerSource } from '../../src/dashboard/redis-viewer-source.ts';
import { DataError } from '../../src/shared/errors.ts';
import { createRedis } from '../../src/shared/redis/connect.ts';
import type { Row } from '../../src/shared/records/rows.ts';
import { RunStore, type RunRecord } from '../../src/shared/stores/run-store.ts';
import { createFileSource } from '../../src/viewer/file-source.ts';
import type { ViewerSource } from '../../src/viewer/source.ts';
import { REDIS_URL } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { writeViewerFixture, type FixtureRollout, type ViewerFixture } from '../helpers/viewer-fixture.ts';

const MAZE = { type: 'Visual Tracking', subtype: 'Maze' };
const FOLD = { type: 'Spatial Perception', subtype: 'Paper Folding' };
const ROLLOUTS: FixtureRollout[] = [
  { task_id: '7', repeat: 0, ...MAZE, outcome: 'correct', script: 'crop' },
  { task_id: '7', repeat: 1, ...MAZE, outcome: 'wrong' },
  { task_id: '12', repeat: 0, ...FOLD, outcome: 'correct', transcript: 'missing' },
  { task_id: '12', repeat: 1, ...FOLD, outcome: 'judge_failed' },
  { task_id: '30', repeat: 0, ...FOLD, outcome: 'infra_failed', transcript: 'none' },
  { task_id: '30', repeat: 1, ...FOLD, outcome: 'no_answer' },
];

const redis = createRedis(REDIS_URL, 'client');
const prefix = `vcftest-rvs-${randomBytes(4).toString('hex')}`;
const store = new RunStore(redis, prefix);
let root: string;
let f: ViewerFixture;

function record(runId: string, outputPath: string, total: number): RunRecord {
  return {
    run_id: runId, benchmark: 'babyvision_opencode', created_at: new Date().toISOString(), num_tasks: Math.ceil(total / 2), num_repeats: 2, total,
    output_jsonl_fpath: outputPath, policy_model: 'policy-vlm', judge_model: 'judge-model', settings: {}, queue_scope: null, origin: 'produce', settings_changes: [],
  };
}

/** The source as a dashboard on a host whose output root is `outputRoot` sees it. */
const sourceAt = (outputRoot: string): ViewerSource => createRedisViewerSource({ store, output: { output_root: outputRoot, output_jsonl_fpath: null } });
const byRollout = (rows: readonly Row[]) => [...rows].sort((a, b) => a.rollout_id.localeCompare(b.rollout_id));

beforeAll(async () => {
  root = createTmpDir();
  f = writeViewerFixture(path.join(root, 'out'), [{ runId: 'live', rollouts: ROLLOUTS }], { stem: 'live' });
  // As the producer and the results consumer leave it: a run record with a relative output path, rows, puzzle blobs.
  await store.createRun(record('live', 'out/live.jsonl', ROLLOUTS.length));
  for (const row of f.rows) await store.putRow(row);
  for (const sha of Object.values(f.puzzles)) await store.putBlob(sha, readFileSync(path.join(f.imagesDir, `${sha}.png`)));
});
afterAll(async () => {
  await deletePrefix(redis, prefix);
  redis.disconnect();
  removeTmpDirs();
});

describe('the dashboard viewer source (Redis)', () => {
  it('gives the rows, metrics and run list the file source gives for the same output', async () => {
    const live = await sourceAt(root).run('live');
    const file = await createFileSource(f.jsonl).run('live');
    expect(live).not.toBeNull();
    expect(byRollout(live!.rows)).toEqual(byRollout(file!.rows));
    expect(live!.rows.map((r) => r.rollout_id)).toEqual(['live-7-0', 'live-7-1', 'live-12-0', 'live-12-1', 'live-30-0', 'live-30-1']);
    expect(live!.metrics).toEqual(file!.metrics);
    expect(live!.metrics).toMatchObject({ 'mean/reward': 0.5, num_scored: 4, num_masked: 2, masked_by_kind: { judge_failed: 1, infra_failed: 1 } });
    expect(live!.meta).toMatchObject({ run_id: 'live', judge_model: 'judge-model', num_repeats: 2, problems: [] });
    expect(live!.meta.origin).toBe(`Redis prefix ${prefix}; output ${f.jsonl}`);
    expect((await sourceAt(root).runs()).find((r) => r.run_id === 'live')).toEqual((await createFileSource(f.jsonl).runs())[0]);
  });

  it('finds a transcript, or says it is missing, not kept, or not read here, and why', async () => {
    const here = sourceAt(root);
    const found = await here.rollout('live', 'live-7-0');
    expect(found?.transcript.status).toBe('found');
    expect(found?.transcript.status === 'found' && found.transcript.record.turns[1].tool_calls[0].images).toEqual([f.cropSha]);
    expect((await here.rollout('live', 'live-12-0'))?.transcript).toEqual({ status: 'missing', looked_for: path.join(f.transcriptsDir, 'live-12-0.json') });
    expect((await here.rollout('live', 'live-30-0'))?.transcript).toEqual({ status: 'not_kept' });

    // A dashboard whose output root is elsewhere looks there, and names the path it tried.
    const elsewhere = createTmpDir();
    expect((await sourceAt(elsewhere).rollout('live', 'live-7-0'))?.transcript).toEqual({
      status: 'missing', looked_for: path.join(elsewhere, 'out', 'live_transcripts', 'live-7-0.json'),
    });

    // A run record that asks for a path outside this host's output root is not followed.
    await store.createRun(record('abroad', '/etc/abroad.jsonl', 1));
    await store.putRow({ ...f.rows[0], run_id: 'abroad', rollout_id: 'abroad-7-0' });
    const abroad = await here.rollout('abroad', 'abroad-7-0');
    expect(abroad?.transcript).toMatchObject({ status: 'unreadable', looked_for: '/etc/abroad.jsonl' });
    expect(abroad?.transcript.status === 'unreadable' && abroad.transcript.problem).toMatch(/^not read on this host \(.*outside this results host's output root/);
    expect((await here.run('abroad'))?.meta.problems).toEqual([expect.stringMatching(/^transcripts are not read on this host: run abroad asks for its output at \/etc\/abroad\.jsonl/)]);
  });

  it('finds runs and rollouts only by the ids Redis holds', async () => {
    const here = sourceAt(root);
    // A transcript waiting for the results host is a hash with a `record` field, as a run's is: its key is no run id.
    await store.putTranscript('live', 'live-7-1', Buffer.from('gzipped record'), new Map());
    for (const id of ['nope', '../live', 'live:rows', 'live:transcript:live-7-1', '*', '']) expect(await here.run(id), id).toBeNull();
    expect(await here.rollout('live:transcript:live-7-1', 'record')).toBeNull();
    for (const id of ['live-99-0', '../live-7-0', 'live-7-0/..', '*']) expect(await here.rollout('live', id), id).toBeNull();
    expect(await here.rollout('nope', 'live-7-0')).toBeNull();
  });

  it('serves images from the transcripts folder, else the puzzle from Redis checked by SHA-256', async () => {
    const here = sourceAt(root);
    const crop = await here.image(f.cropSha);
    expect(crop && Buffer.from(crop).equals(readFileSync(path.join(f.imagesDir, `${f.cropSha}.png`)))).toBe(true);
    // The crop exists only in the folder; a puzzle also lives in Redis, where it is read once its file is gone.
    const puzzle = f.puzzles['12'];
    const bytes = readFileSync(path.join(f.imagesDir, `${puzzle}.png`));
    rmSync(path.join(f.imagesDir, `${puzzle}.png`));
    expect(Buffer.from((await here.image(puzzle))!).equals(bytes)).toBe(true);
    expect(await sourceAt(createTmpDir()).image(f.cropSha)).toBeNull();
    expect(await here.image('0'.repeat(64))).toBeNull();

    const forged = 'f'.repeat(64);
    await store.putBlob(forged, Buffer.from('not the bytes of this hash'));
    await expect(here.image(forged)).rejects.toThrow(DataError);
    await expect(here.image(forged)).rejects.toThrow(/changed after it was produced/);
  });

  it('lists a run with no row yet and draws it empty', async () => {
    await store.createRun(record('fresh', 'out/fresh.jsonl', 4));
    const here = sourceAt(root);
    expect((await here.runs()).find((r) => r.run_id === 'fresh')).toEqual({
      run_id: 'fresh', benchmark: 'babyvision_opencode', policy_model: 'policy-vlm', rollouts: 0, scored: 0, correct: 0, mean_reward: null, last_finished_at: '',
    });
    const fresh = await here.run('fresh');
    expect(fresh?.rows).toEqual([]);
    expect(fresh?.metrics).toMatchObject({ num_rollouts: 0, 'mean/reward': null, num_repeats: 2 });
  });
});
