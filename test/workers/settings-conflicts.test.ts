/** What a worker says when its own configuration sets a run setting away from the run's value. */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/shared/config/load.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { runSettingsFrom } from '../../src/shared/config/run-settings.ts';
import type { RunRecord } from '../../src/shared/stores/run-store.ts';
import { RunSettingConflicts } from '../../src/workers/settings-conflicts.ts';

function run(overrides: string[]): RunRecord {
  const config = loadConfig({ env: {}, overrides });
  return {
    run_id: 'r1', benchmark: 'babyvision_opencode', created_at: new Date(0).toISOString(), num_tasks: 1, num_repeats: 1, total: 1,
    output_jsonl_fpath: 'out.jsonl', policy_model: config.policy_model_name, judge_model: config.visual_coding_opencode_judge_model_name,
    settings: runSettingsFrom(config), queue_scope: null, origin: 'produce', settings_changes: [],
  };
}

function warningsOf(hostOverrides: string[], record: RunRecord): Array<Record<string, unknown>> {
  const stream = new PassThrough();
  const lines: string[] = [];
  stream.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)));
  const conflicts = new RunSettingConflicts(loadConfig({ env: {}, overrides: hostOverrides }), 'sandbox', createLogger({ level: 'warn', destination: stream }));
  conflicts.check(record);
  conflicts.check(record);
  return lines.map((l) => JSON.parse(l));
}

describe('RunSettingConflicts', () => {
  it('says once per run and key which value is used, and how to change the run', async () => {
    const warnings = warningsOf(['++policy_model_name=host-vlm', '++judge.temperature=0.5'], run(['++policy_model_name=run-vlm']));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ run: 'r1', key: 'policy_model_name', run_value: 'run-vlm', host_value: 'host-vlm' });
    expect(warnings[0].msg).toContain('vcfleet run-set --run-id r1 ++policy_model_name=host-vlm');
  });

  it('compares an endpoint as runs store it, so credentials in the host\'s URL are neither a difference nor logged', async () => {
    const record = run(['++policy.endpoint=https://models.example/v1']);
    expect(warningsOf(['++policy.endpoint=https://user:s3cret@models.example/v1'], record)).toEqual([]);
    const other = warningsOf(['++policy.endpoint=https://user:s3cret@other.example/v1'], record);
    expect(other).toHaveLength(1);
    expect(other[0]).toMatchObject({ key: 'policy.endpoint', host_value: 'https://other.example/v1' });
    expect(JSON.stringify(other)).not.toContain('s3cret');
  });
});
