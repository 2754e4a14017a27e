/**
 * `vcfleet metrics` as a user runs it (its own OS process): a file with two runs gives one block per
 * run and writes nothing unless --run-id picks one; JSON keyed by run id; a run that is not in the
 * file is named; the run identity the results consumer recorded survives a recompute.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildRow, type Grading, type Row } from '../../../src/shared/records/rows.ts';
import { metricsPathFor } from '../../../src/shared/output/metrics.ts';
import { runCli } from '../../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';
import { rolloutOutcome } from '../../../src/shared/records/rollout-outcome.ts';

afterEach(removeTmpDirs);

const scored = (reward: 0 | 1): Grading => ({ kind: 'scored', verdict: reward ? 'equivalent' : 'different', reason: '', reward });

function row(runId: string, policy: string, i: number, grading: Grading, finishedAt: string, repeat = 0): Row {
  const task = { task_id: `t${i}`, type: i % 2 ? 'Odd' : 'Even', subtype: 'S', ans_type: 'choice' as const, gold: 'A' };
  const r = buildRow({ runId, benchmark: 'babyvision_opencode', policyModel: policy, judgeModel: 'judge-1', rolloutId: `${runId}-t${i}-${repeat}`, repeat, task },
    rolloutOutcome({ stop_reason: 'answered', extracted_answer: 'A', turns: 2, tool_calls: 1, input_tokens: 10, output_tokens: 1, wall_s: 3 }), grading);
  return { ...r, finished_at: finishedAt };
}

/** Run a: 3 rows, 2 correct. Run b (another policy): 4 rows, 1 correct, 1 wrong, 2 masked; interleaved with a. */
function twoRunFile(dir: string): string {
  const a = [row('a', 'pol-a', 1, scored(1), '2030-01-01T00:00:10.000Z'), row('a', 'pol-a', 2, scored(1), '2030-01-01T00:00:30.000Z'), row('a', 'pol-a', 3, scored(0), '2030-01-01T00:00:20.000Z')];
  const masked: Grading = { kind: 'masked', failure: 'judge_failed', error: 'judge down' };
  const b = [row('b', 'pol-b', 1, scored(1), '2030-02-01T00:00:00.000Z'), row('b', 'pol-b', 2, masked, '2030-02-01T00:05:00.000Z'), row('b', 'pol-b', 3, scored(0), '2030-02-01T00:01:00.000Z'), row('b', 'pol-b', 4, masked, '2030-02-01T00:02:00.000Z')];
  const file = path.join(dir, 'both.jsonl');
  writeFileSync(file, [a[0], b[0], a[1], b[1], b[2], a[2], b[3]].map((r) => `${JSON.stringify(r)}\n`).join(''));
  return file;
}

describe('vcfleet metrics', () => {
  it('reports each run of a two-run file on its own, and writes no metrics file', async () => {
    const file = twoRunFile(createTmpDir());
    const res = await runCli(['metrics', file]);
    expect(res.code, res.output).toBe(0);
    const blocks = res.stdout.trim().split('\n\n');
    expect(blocks).toHaveLength(2);
    expect(blocks[0]).toMatch(/^run +a\n/);
    expect(blocks[0]).toMatch(/^policy \/ judge +pol-a \/ judge-1$/m);
    expect(blocks[0]).toMatch(/^mean\/reward +66\.7%/m);
    expect(blocks[0]).toMatch(/^scored \/ masked +3 \/ 0$/m);
    expect(blocks[1]).toMatch(/^run +b\n/);
    expect(blocks[1]).toMatch(/^policy \/ judge +pol-b \/ judge-1$/m);
    expect(blocks[1]).toMatch(/^mean\/reward +50\.0%/m);
    expect(blocks[1]).toMatch(/^strict\/reward +25\.0%$/m);
    expect(blocks[1]).toMatch(/^scored \/ masked +2 \/ 2 \(judge_failed 2\)$/m);
    expect(blocks[1]).toMatch(/^metrics +not written: .* holds 2 runs; pass --run-id/m);
    expect(res.output).toContain(`${file} holds 2 runs (a, b): no metrics file written`);
    expect(existsSync(metricsPathFor(file))).toBe(false);
  });

  it('prints JSON keyed by run id, with what the rows tell of each run and no config hash', async () => {
    const file = twoRunFile(createTmpDir());
    const res = await runCli(['metrics', file, '--json', '--stdout']);
    expect(res.code, res.output).toBe(0);
    const body = JSON.parse(res.stdout);
    expect(Object.keys(body)).toEqual(['a', 'b']);
    expect(body.a).toMatchObject({ run_id: 'a', num_rollouts: 3, num_scored: 3, 'mean/reward': 0.666667 });
    expect(body.b).toMatchObject({ run_id: 'b', num_rollouts: 4, num_masked: 2, masked_by_kind: { judge_failed: 2 }, 'mean/reward': 0.5 });
    expect(body.a.run).toEqual({
      run_id: 'a', benchmark: 'babyvision_opencode', policy_model: 'pol-a', judge_model: 'judge-1',
      config_hash: null, started_at: null, finished_at: '2030-01-01T00:00:30.000Z', wall_s: null,
    });
    expect(body.b.run).toMatchObject({ policy_model: 'pol-b', finished_at: '2030-02-01T00:05:00.000Z' });
    expect(existsSync(metricsPathFor(file))).toBe(false);
  });

  it('writes the one run --run-id picks, and names the file and its runs for a run it does not hold', async () => {
    const file = twoRunFile(createTmpDir());
    const one = await runCli(['metrics', file, '--run-id', 'b', '--json']);
    expect(one.code, one.output).toBe(0);
    const printed = JSON.parse(one.stdout);
    expect(printed).toMatchObject({ run_id: 'b', num_rollouts: 4, run: { run_id: 'b', policy_model: 'pol-b' } });
    expect(JSON.parse(readFileSync(metricsPathFor(file), 'utf8'))).toEqual(printed);
    expect(one.output).toContain(`wrote ${metricsPathFor(file)} (run b)`);

    const missing = await runCli(['metrics', file, '--run-id', 'zzz']);
    expect(missing.code).toBe(2);
    expect(missing.output).toContain(`vcfleet: run zzz is not in ${file}; it holds runs a, b`);
    expect(missing.stdout).toBe('');
  });

  it('writes a single-run file\'s metrics, keeping the run identity and repeats the results consumer recorded', async () => {
    const dir = createTmpDir();
    const file = path.join(dir, 'one.jsonl');
    const rows = [row('c', 'pol-c', 1, scored(1), '2030-03-01T01:00:00.000Z'), row('c', 'pol-c', 2, scored(0), '2030-03-01T01:30:00.000Z')];
    writeFileSync(file, rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
    const hash = 'c'.repeat(64);
    // As the consumer wrote it for a 2-repeat run whose second repeat has no row yet.
    writeFileSync(metricsPathFor(file), JSON.stringify({ run_id: 'c', num_repeats: 2, run: { run_id: 'c', config_hash: hash, started_at: '2030-03-01T00:00:00.000Z' } }));
    const res = await runCli(['metrics', file]);
    expect(res.code, res.output).toBe(0);
    expect(res.stdout).toMatch(/^config hash +c{64}$/m);
    expect(res.stdout).toMatch(/^time +2030-03-01T00:00:00\.000Z -> 2030-03-01T01:30:00\.000Z \(1h 30m 00s\)$/m);
    const written = JSON.parse(readFileSync(metricsPathFor(file), 'utf8'));
    expect(written.run).toEqual({
      run_id: 'c', benchmark: 'babyvision_opencode', policy_model: 'pol-c', judge_model: 'judge-1',
      config_hash: hash, started_at: '2030-03-01T00:00:00.000Z', finished_at: '2030-03-01T01:30:00.000Z', wall_s: 5400,
    });
    expect(written).toMatchObject({ num_repeats: 2, num_rollouts: 2, 'repeats/means': [0.5, null] });

    const bad = await runCli(['metrics', file, '--num-repeats', '0']);
    expect(bad.code).toBe(2);
    expect(bad.output).toContain('--num-repeats must be a whole number of at least 1, not "0"');
    const gone = await runCli(['metrics', path.join(dir, 'nope.jsonl')]);
    expect(gone.code).toBe(2);
    expect(gone.output).toContain(`${path.join(dir, 'nope.jsonl')} does not exist`);
  });

  it('prices a finished run with ++pricing.… (replacing what it recorded, side by side), and refuses a ++ setting it would ignore', async () => {
    const dir = createTmpDir();
    const file = path.join(dir, 'priced.jsonl');
    // 2 rows of 10 input and 1 output policy tokens each: 20 in, 2 out.
    writeFileSync(file, [row('p', 'pol', 1, scored(1), '2030-01-01T00:00:00.000Z'), row('p', 'pol', 2, scored(0), '2030-01-01T00:01:00.000Z')].map((r) => `${JSON.stringify(r)}\n`).join(''));
    // As the results consumer wrote it for a run produced with a judge price only.
    writeFileSync(metricsPathFor(file), JSON.stringify({ run_id: 'p', pricing: { policy: { input_usd_per_mtok: null, output_usd_per_mtok: null }, judge: { input_usd_per_mtok: 1, output_usd_per_mtok: null } } }));
    const res = await runCli(['metrics', file, '++pricing.policy.input_usd_per_mtok=100000', '++pricing.policy.output_usd_per_mtok=500000']);
    expect(res.code, res.output).toBe(0);
    // 20 x 0.1 + 2 x 0.5 = 3 dollars.
    expect(res.stdout).toMatch(/^cost +\$3\.00? \(policy \$3\.00?, judge \$0(\.00?)?\)$/m);
    const written = JSON.parse(readFileSync(metricsPathFor(file), 'utf8'));
    expect(written.cost_usd).toEqual({ policy: 3, judge: 0, total: 3 });
    expect(written.pricing).toEqual({ policy: { input_usd_per_mtok: 100000, output_usd_per_mtok: 500000 }, judge: { input_usd_per_mtok: 1, output_usd_per_mtok: null } });

    const ignored = await runCli(['metrics', file, '++num_repeats=3', '++pricing.judge.input_usd_per_mtok=2']);
    expect(ignored.code).toBe(2);
    expect(ignored.output).toContain('++num_repeats would change nothing here');
    expect(ignored.output).toContain('++pricing.policy.input_usd_per_mtok=');
    const negative = await runCli(['metrics', file, '++pricing.policy.input_usd_per_mtok=-1']);
    expect(negative.code).toBe(2);
    expect(negative.output).toContain('pricing.policy.input_usd_per_mtok');
  });
});
