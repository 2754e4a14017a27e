/** The output file of a run against what Redis holds: cut lines, missing rows, another run's file. */
import { existsSync, readFileSync, readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createLogger } from '../../../src/shared/logger.ts';
import { buildRow, type Row } from '../../../src/shared/records/rows.ts';
import { ConfigSchema } from '../../../src/shared/config/load.ts';
import { runSettingsFrom } from '../../../src/shared/config/run-settings.ts';
import { RunStore, type RunRecord } from '../../../src/shared/stores/run-store.ts';
import { RunOutput } from '../../../src/workers/results/run-output.ts';
import { configHash } from '../../../src/shared/output/run-identity.ts';
import { REDIS_URL } from '../../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';
import { deletePrefix } from '../../helpers/redis-keys.ts';
import { rolloutOutcome } from '../../../src/shared/records/rollout-outcome.ts';

const logger = createLogger({ level: 'silent' });

function row(runId: string, i: number, reward: 0 | 1 = 1): Row {
  const task = { task_id: `t${i}`, type: 'T', subtype: 'S', ans_type: 'choice' as const, gold: 'A' };
  return buildRow({ runId, benchmark: 'b', policyModel: 'p', judgeModel: 'j', rolloutId: `${runId}-t${i}-0`, repeat: 0, task },
    rolloutOutcome({ stop_reason: 'answered', extracted_answer: 'A', turns: 1, tool_calls: 0, input_tokens: 1, output_tokens: 1, wall_s: 1 }),
    { kind: 'scored', verdict: reward ? 'equivalent' : 'different', reason: '', reward });
}

function record(runId: string, createdAt = '2030-01-01T00:00:00.000Z'): RunRecord {
  const config = ConfigSchema.parse({ policy_model_name: 'p', visual_coding_opencode_judge_model_name: 'j' });
  return {
    run_id: runId, benchmark: 'b', created_at: createdAt, num_tasks: 3, num_repeats: 1, total: 3,
    output_jsonl_fpath: 'unused.jsonl', policy_model: 'p', judge_model: 'j', settings: runSettingsFrom(config), queue_scope: null, origin: 'produce', settings_changes: [],
  };
}

describe('RunOutput', () => {
  const redis = new Redis(REDIS_URL);
  const prefix = `vcftest-${randomBytes(4).toString('hex')}`;
  const store = new RunStore(redis, prefix);
  afterEach(async () => {
    await deletePrefix(redis, prefix);
    removeTmpDirs();
  });
  afterAll(() => redis.disconnect());

  it('moves another run\'s file aside instead of overwriting it', async () => {
    const dir = createTmpDir();
    const file = path.join(dir, 'out.jsonl');
    const old = `${JSON.stringify(row('old', 1))}\n${JSON.stringify(row('old', 2))}\n`;
    writeFileSync(file, old);
    await store.putRow(row('new', 1));
    const out = new RunOutput(record('new'), file, store, logger);
    await out.open();
    await out.close();
    const aside = readdirSync(dir).filter((f) => f.startsWith('out.jsonl.old.') && f.endsWith('.bak'));
    expect(aside).toHaveLength(1);
    expect(readFileSync(path.join(dir, aside[0]), 'utf8')).toBe(old);
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]).run_id).toBe('new');
  });

  it('drops a cut line, appends what Redis has and the file lacks, and puts file-only rows back into Redis', async () => {
    const dir = createTmpDir();
    mkdirSync(path.join(dir, 'o'));
    const file = path.join(dir, 'o', 'out.jsonl');
    const r1 = row('run', 1);
    const r2 = row('run', 2);
    const r3 = row('run', 3, 0);
    await store.putRow(r1);
    await store.putRow(r2);
    writeFileSync(file, `${JSON.stringify(r1)}\n${JSON.stringify(r3)}\n${JSON.stringify(r2).slice(0, 40)}`);
    const out = new RunOutput(record('run'), file, store, logger);
    await out.open();
    expect(await out.commit(r1)).toBe('duplicate');
    await out.close();
    const rows = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Row);
    expect(rows.map((r) => r.rollout_id).sort()).toEqual([r1, r2, r3].map((r) => r.rollout_id).sort());
    expect(await store.getRow('run', r3.rollout_id)).toMatchObject({ reward: 0 });
    const metrics = JSON.parse(readFileSync(out.metricsPath, 'utf8'));
    expect(metrics.num_rollouts).toBe(3);
    expect(metrics['mean/reward']).toBeCloseTo(2 / 3, 5);
    expect(existsSync(`${file}.tmp-${process.pid}`)).toBe(false);
  });

  it('replaced rows update the metrics at once and rewrite the file at most once per flush; a crash before the flush is mended on open', async () => {
    const dir = createTmpDir();
    const file = path.join(dir, 'out.jsonl');
    const masked = (i: number): Row => ({ ...row('rep', i), reward: null, failure_kind: 'judge_failed', judge_verdict: null } as Row);
    const out = new RunOutput(record('rep'), file, store, logger);
    await out.open();
    for (const i of [1, 2, 3]) expect(await out.commit(masked(i))).toBe('new');
    const before = readFileSync(file, 'utf8');
    const rewrites = out.writes.rewrites;
    expect(await out.commit(row('rep', 1))).toBe('replaced');
    expect(await out.commit(row('rep', 2, 0))).toBe('replaced');
    // Not yet rewritten: the file still holds the masked rows; the metrics already count the new ones.
    expect(readFileSync(file, 'utf8')).toBe(before);
    expect(out.writes.rewrites).toBe(rewrites);
    out.writeMetrics();
    expect(JSON.parse(readFileSync(out.metricsPath, 'utf8'))).toMatchObject({ num_rollouts: 3, 'mean/reward': 0.5 });
    await out.flush();
    await out.flush();
    expect(out.writes.rewrites).toBe(rewrites + 1);
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Row);
    expect(Object.fromEntries(lines.map((r) => [r.rollout_id, r.reward]))).toEqual({ 'rep-t1-0': 1, 'rep-t2-0': 0, 'rep-t3-0': null });
    // A replacement, then the process dies before its flush: the next open finds the file differs from Redis.
    expect(await out.commit(row('rep', 3))).toBe('replaced');
    const reopened = new RunOutput(record('rep'), file, store, logger);
    await reopened.open();
    await reopened.close();
    const mended = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Row);
    expect(mended.map((r) => r.reward).sort()).toEqual([0, 1, 1]);
    const metrics = JSON.parse(readFileSync(reopened.metricsPath, 'utf8'));
    expect(metrics.num_rollouts).toBe(3);
    expect(metrics['mean/reward']).toBeCloseTo(2 / 3, 5);
    expect(readdirSync(dir).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('records the run\'s identity in the metrics file: models, settings hash, start, last row and wall time', async () => {
    const dir = createTmpDir();
    const file = path.join(dir, 'out.jsonl');
    const at = (iso: string, r: Row): Row => ({ ...r, finished_at: iso });
    const run = record('idr', '2030-01-01T00:00:00.000Z');
    const out = new RunOutput(run, file, store, logger);
    await out.open();
    out.writeMetrics(true);
    const empty = JSON.parse(readFileSync(out.metricsPath, 'utf8'));
    expect(empty.run).toMatchObject({ run_id: 'idr', started_at: run.created_at, finished_at: null, wall_s: null });
    // Rows arrive out of time order (several workers): the latest finish counts, not the last commit.
    await out.commit(at('2030-01-01T00:01:30.250Z', row('idr', 1)));
    await out.commit(at('2030-01-01T00:02:05.500Z', row('idr', 2, 0)));
    await out.commit(at('2030-01-01T00:00:40.000Z', row('idr', 3)));
    await out.close();
    const metrics = JSON.parse(readFileSync(out.metricsPath, 'utf8'));
    expect(metrics.run).toEqual({
      run_id: 'idr', benchmark: 'b', policy_model: 'p', judge_model: 'j',
      config_hash: configHash(run.settings), started_at: '2030-01-01T00:00:00.000Z', finished_at: '2030-01-01T00:02:05.500Z', wall_s: 125.5,
    });
    expect(metrics.run.config_hash).toMatch(/^[0-9a-f]{64}$/);
    // Every field the file had before is still there, at the top.
    expect(metrics).toMatchObject({ run_id: 'idr', num_rollouts: 3, num_scored: 3, num_repeats: 1 });
    expect(metrics['mean/reward']).toBeCloseTo(2 / 3, 5);
  });
});
