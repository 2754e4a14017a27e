/**
 * `vcfleet runs` as a user runs it (its own OS process) against a prefix with two produced runs:
 * newest first, rows out of the total, accuracy over scored rows with the masked ones counted apart.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { buildRow, type Grading } from '../../../src/shared/records/rows.ts';
import { RunStore } from '../../../src/shared/stores/run-store.ts';
import { makeFleetEnv, REDIS_URL, runCli, type FleetEnv } from '../../helpers/fleet.ts';
import { removeTmpDirs } from '../../helpers/tmp.ts';
import { rolloutOutcome } from '../../../src/shared/records/rollout-outcome.ts';

describe('vcfleet runs', () => {
  let env: FleetEnv;
  const redis = new Redis(REDIS_URL);
  beforeAll(async () => {
    // No worker runs here: the judge URL is only a config value.
    env = await makeFleetEnv({ rows: 4, judgeUrl: 'http://127.0.0.1:9/v1' });
    const first = await runCli(['produce', '--run-id', 'first', ...env.overrides]);
    expect(first.code, first.output).toBe(0);
    const second = await runCli(['produce', '--run-id', 'second', ...env.overrides, '++num_repeats=2', '++policy_model_name=other-vlm']);
    expect(second.code, second.output).toBe(0);
    // Three rows of the first run, as the results consumer stores them: right, wrong, masked.
    const store = new RunStore(redis, env.prefix);
    const gradings: Grading[] = [
      { kind: 'scored', verdict: 'equivalent', reason: '', reward: 1 },
      { kind: 'scored', verdict: 'different', reason: '', reward: 0 },
      { kind: 'masked', failure: 'judge_failed', error: 'judge down' },
    ];
    for (const [i, grading] of gradings.entries()) {
      const t = env.fixture.expected[i];
      const task = { task_id: t.task_id, type: t.type, subtype: t.subtype, ans_type: t.ans_type, gold: t.gold };
      await store.putRow(buildRow({ runId: 'first', benchmark: 'babyvision_opencode', policyModel: 'policy', judgeModel: 'gpt-4o-mini', rolloutId: `first-${t.task_id}-0`, repeat: 0, task },
        rolloutOutcome({ stop_reason: 'answered', extracted_answer: 'A', turns: 1, tool_calls: 0, input_tokens: 1, output_tokens: 1, wall_s: 1 }), grading));
    }
  });
  afterAll(async () => {
    await env?.cleanup();
    redis.disconnect();
    removeTmpDirs();
  });

  it('lists the runs newest first with benchmark, policy, progress, accuracy and creation time', async () => {
    const res = await runCli(['runs', ...env.overrides]);
    expect(res.code, res.output).toBe(0);
    const lines = res.stdout.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^run +benchmark +policy +rows +accuracy +created$/);
    const date = '\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\dZ';
    expect(lines[1]).toMatch(new RegExp(`^second +babyvision_opencode +other-vlm +0/8 +- \\(0/0\\) +${date}$`));
    expect(lines[2]).toMatch(new RegExp(`^first +babyvision_opencode +policy +3/4 +50\\.0% \\(1/2\\), 1 masked +${date}$`));
  });

  it('prints JSON and keeps to --limit, saying there are more', async () => {
    const json = await runCli(['runs', '--json', '--limit', '1', ...env.overrides]);
    expect(json.code, json.output).toBe(0);
    const runs = JSON.parse(json.stdout);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ run_id: 'second', policy_model: 'other-vlm', total: 8, rows: 0, scored: 0, accuracy: null, masked: 0 });
    const all = JSON.parse((await runCli(['runs', '--json', ...env.overrides])).stdout);
    expect(all.map((r: { run_id: string }) => r.run_id)).toEqual(['second', 'first']);
    expect(all[1]).toMatchObject({ total: 4, rows: 3, scored: 2, correct: 1, accuracy: 0.5, masked: 1, masked_by_kind: { judge_failed: 1 } });
    expect(Date.parse(all[0].created_at)).toBeGreaterThan(Date.parse(all[1].created_at));

    const table = await runCli(['runs', '--limit', '1', ...env.overrides]);
    expect(table.stdout).toContain('(the 1 newest of 2 runs; see more with --limit)');
  });

  it('says when the prefix has no runs, and refuses a --limit that is not a count', async () => {
    const empty = await runCli(['runs', ...env.overrides, `++queues.prefix=vcftest-empty-${randomBytes(4).toString('hex')}`]);
    expect(empty.code, empty.output).toBe(0);
    expect(empty.stdout).toMatch(/^no runs under prefix "vcftest-empty-[0-9a-f]{8}"/);
    const bad = await runCli(['runs', '--limit', '0', ...env.overrides]);
    expect(bad.code).toBe(2);
    expect(bad.output).toContain('vcfleet: --limit must be a whole number of runs, at least 1, not "0"');
  });
});
