/** The run identity a metrics file records: the settings hash, and what rows and an earlier file tell. */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../../src/shared/config/load.ts';
import { runSettingsFrom } from '../../../src/shared/config/run-settings.ts';
import { buildRow, type Row } from '../../../src/shared/records/rows.ts';
import { configHash, identityFromRows, recordedIdentity } from '../../../src/shared/output/run-identity.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';
import { rolloutOutcome } from '../../../src/shared/records/rollout-outcome.ts';

afterEach(removeTmpDirs);

function row(i: number, finishedAt: string, judged = true): Row {
  const task = { task_id: `t${i}`, type: 'T', subtype: 'S', ans_type: 'choice' as const, gold: 'A' };
  const r = buildRow({ runId: 'r', benchmark: 'bench', policyModel: 'pm', judgeModel: judged ? 'jm' : null, rolloutId: `r-t${i}-0`, repeat: 0, task },
    rolloutOutcome({ stop_reason: 'answered', extracted_answer: 'A', turns: 1, tool_calls: 0, input_tokens: 1, output_tokens: 1, wall_s: 1 }),
    { kind: 'scored', verdict: 'equivalent', reason: '', reward: 1 });
  return { ...r, finished_at: finishedAt };
}

describe('configHash', () => {
  it('hashes the settings, not the order of their keys', () => {
    const settings = runSettingsFrom(ConfigSchema.parse({}));
    const reordered = Object.fromEntries(Object.entries(settings).reverse());
    expect(configHash(reordered)).toBe(configHash(settings));
    expect(configHash(settings)).toMatch(/^[0-9a-f]{64}$/);
    const other = runSettingsFrom(ConfigSchema.parse({ task_timeout_s: 60 }));
    expect(configHash(other)).not.toBe(configHash(settings));
    const nested = runSettingsFrom(ConfigSchema.parse({ judge: { temperature: 0.5 } }));
    expect(configHash(nested)).not.toBe(configHash(settings));
  });
});

describe('identityFromRows', () => {
  it('takes models and benchmark from the rows, the end from the latest row, and no hash or start', () => {
    const rows = [row(1, '2030-01-01T00:05:00.000Z', false), row(2, '2030-01-01T00:09:00.000Z'), row(3, '2030-01-01T00:07:00.000Z')];
    expect(identityFromRows('r', rows)).toEqual({
      run_id: 'r', benchmark: 'bench', policy_model: 'pm', judge_model: 'jm',
      config_hash: null, started_at: null, finished_at: '2030-01-01T00:09:00.000Z', wall_s: null,
    });
  });

  it('keeps the hash and start an earlier metrics file of the same run recorded, and only of that run', () => {
    const dir = createTmpDir();
    const file = path.join(dir, 'x_aggregate_metrics.json');
    const run = { run_id: 'r', config_hash: 'a'.repeat(64), started_at: '2030-01-01T00:00:00.000Z', benchmark: 'bench' };
    writeFileSync(file, JSON.stringify({ run_id: 'r', num_repeats: 3, run }));
    const recorded = recordedIdentity(file, 'r');
    expect(recorded).toMatchObject({ config_hash: 'a'.repeat(64), started_at: run.started_at, num_repeats: 3 });
    const id = identityFromRows('r', [row(1, '2030-01-01T00:01:00.500Z')], recorded);
    expect(id).toMatchObject({ config_hash: 'a'.repeat(64), started_at: run.started_at, finished_at: '2030-01-01T00:01:00.500Z', wall_s: 60.5 });
    expect(recordedIdentity(file, 'other')).toBeNull();
    writeFileSync(file, JSON.stringify({ run_id: 'r', run: { ...run, config_hash: 'not a hash' } }));
    expect(recordedIdentity(file, 'r')?.config_hash).toBeNull();
    writeFileSync(file, '{"run_id": "r", "run": {');
    expect(recordedIdentity(file, 'r')).toBeNull();
    expect(recordedIdentity(path.join(dir, 'missing.json'), 'r')).toBeNull();
  });

  it('a worker host whose clock runs behind the producer\'s gives a wall time of 0, not a negative one', () => {
    const recorded = { run_id: 'r', benchmark: 'bench', policy_model: 'pm', judge_model: 'jm', config_hash: null, started_at: '2030-01-01T00:00:10.000Z', finished_at: null, wall_s: null };
    expect(identityFromRows('r', [row(1, '2030-01-01T00:00:07.250Z')], recorded)).toMatchObject({ finished_at: '2030-01-01T00:00:07.250Z', wall_s: 0 });
  });
});
