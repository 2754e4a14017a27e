/**
 * The main job end to end, as a user types it: `vcfleet run --benchmark babyvision_opencode` as its
 * own OS process, with no REDIS_URL (so it starts and stops a private redis-server), a prepared
 * fixture benchmark, a scripted policy server as `policy_base_url` and a scripted judge as the judge:
 * every puzzle goes through the real OpenCode in a real `local` sandbox.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TranscriptRecordSchema } from '../../src/shared/records/transcript.ts';
import { RowSchema } from '../../src/shared/records/rows.ts';
import { metricsPathFor } from '../../src/shared/output/metrics.ts';
import { writeFixtureParquet } from '../helpers/fixture-parquet.ts';
import { scripts, startScriptedPolicyServer, type ScriptedPolicyServer } from '../helpers/scripted-policy-server.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { runCli } from '../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';

const POLICY_KEY = 'sk-policy-RUNTEST-5b1e';
const JUDGE_KEY = 'sk-judge-RUNTEST-77aa';

describe('vcfleet run with the real OpenCode', () => {
  let policy: ScriptedPolicyServer;
  const judge = useScriptedJudge();
  afterAll(async () => {
    await policy?.close();
    removeTmpDirs();
  });

  it('runs every puzzle through OpenCode in local sandboxes and writes rows and metrics', async () => {
    const dir = createTmpDir('vcfleet-run-oc-');
    const fixture = writeFixtureParquet(path.join(dir, 'bv.parquet'), { rows: 3 });
    // The first two puzzles are answered right (after a python call on the image), the third wrong.
    const table = Object.fromEntries(fixture.expected.map((t, i) => [t.question, i < 2 ? t.gold : 'ZZZ']));
    policy = await startScriptedPolicyServer({ script: scripts.demo(table) });
    const output = path.join(dir, 'out', 'bv.jsonl');
    const args = [
      'run', '--benchmark', 'babyvision_opencode',
      `++babyvision_parquet=${fixture.path}`, `++data_dir=${path.join(dir, 'data')}`, `++state_dir=${path.join(dir, 'state')}`,
      `++output_jsonl_fpath=${output}`, `++policy_base_url=${policy.url}`, '++policy_model_name=scripted-vlm', `++visual_coding_opencode_judge_base_url=${judge.url}`,
      '++task_timeout_s=240', '++queues.prefix=vcftest-runoc',
    ];
    const result = await runCli(args, { POLICY_API_KEY: POLICY_KEY, OPENAI_API_KEY: JUDGE_KEY });
    expect(result.code, result.output).toBe(0);
    expect(result.output).toContain('started a private redis-server');
    expect(result.output).toMatch(/run babyvision-opencode-\S+: 3 rollouts \(stop with Ctrl-C; resume with `node bin\/vcfleet\.js run --run-id /);
    expect(result.stdout).toMatch(/status\s+complete \(3\/3 rollouts\)/);

    const rows = readFileSync(output, 'utf8').trim().split('\n').map((l) => RowSchema.parse(JSON.parse(l)));
    expect(rows).toHaveLength(3);
    for (const [i, task] of fixture.expected.entries()) {
      const row = rows.find((r) => r.task_id === task.task_id)!;
      expect(row).toMatchObject({
        stop_reason: 'answered', failure_kind: null, expected_answer: task.gold,
        extracted_answer: i < 2 ? task.gold : 'ZZZ', reward: i < 2 ? 1 : 0, judge_verdict: i < 2 ? 'equivalent' : 'different',
        turns: 2, tool_calls: 1,
      });
      expect(row.input_tokens).toBeGreaterThan(0);
    }
    const metrics = JSON.parse(readFileSync(metricsPathFor(output), 'utf8'));
    expect(metrics['mean/reward']).toBeCloseTo(2 / 3, 5);
    expect(metrics.num_rollouts).toBe(3);

    // The policy key reached the policy server (through the gateway), and nothing else.
    expect(policy.requests.every((r) => r.headers.authorization === `Bearer ${POLICY_KEY}`)).toBe(true);
    expect(judge.requests.every((r) => r.headers.authorization === `Bearer ${JUDGE_KEY}`)).toBe(true);
    // Every row names its transcript beside the JSONL: the turns, the judge's verdict and prompt, the images.
    const transcripts = path.join(dir, 'out', 'bv_transcripts');
    const records = readdirSync(transcripts).filter((f) => f.endsWith('.json'));
    expect(records).toHaveLength(3);
    for (const row of rows) {
      expect(row.transcript).toMatch(/^bv_transcripts\/.+\.json$/);
      const t = TranscriptRecordSchema.parse(JSON.parse(readFileSync(path.join(dir, 'out', row.transcript!), 'utf8')));
      expect(t.turns).toHaveLength(2);
      expect(t.turns[0].tool_calls[0].output).toMatch(/size/);
      expect(t.judge).toMatchObject({ verdict: row.judge_verdict, reason: row.judge_reason });
      expect(t.judge!.prompt.user).toContain(JSON.stringify(row.expected_answer));
      expect(existsSync(path.join(transcripts, 'images', `${t.task.image_sha256}.png`))).toBe(true);
    }
    for (const file of [output, metricsPathFor(output), ...records.map((f) => path.join(transcripts, f))]) {
      const text = readFileSync(file, 'utf8');
      expect(text).not.toContain(POLICY_KEY);
      expect(text).not.toContain(JUDGE_KEY);
    }
    expect(result.output).not.toContain(POLICY_KEY);
    expect(result.output).not.toContain(JUDGE_KEY);
    // The private Redis kept its append-only file for a resume, and was stopped.
    expect(existsSync(path.join(dir, 'state', 'redis'))).toBe(true);
  });
});
