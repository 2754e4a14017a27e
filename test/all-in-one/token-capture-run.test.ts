/**
 * Token capture as a trainer uses it: `vcfleet run ++policy.token_capture=true` as its own OS process
 * against a vLLM-shaped scripted server (the real OpenCode in a real `local` sandbox, a scripted
 * judge): the trajectory travels through Redis and lands beside the JSONL with the row's reward, and
 * the row names it and says whether it can be trained on.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RowSchema } from '../../src/shared/records/rows.ts';
import { TrajectorySchema } from '../../src/shared/records/trajectory.ts';
import { writeFixtureParquet } from '../helpers/fixture-parquet.ts';
import { scripts } from '../helpers/scripted-policy-server.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { startVllmPolicyServer, type VllmPolicyServer } from '../helpers/vllm-policy-server.ts';
import { runCli } from '../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';

const POLICY_KEY = 'sk-policy-TOKENRUN-51';

describe('vcfleet run with token capture', () => {
  let policy: VllmPolicyServer;
  const judge = useScriptedJudge();
  afterAll(async () => {
    await policy?.close();
    removeTmpDirs();
  });

  it('writes <stem>_trajectories/<rollout>.json with the reward; the row names it and carries token_capture', async () => {
    const dir = createTmpDir('vcfleet-run-tc-');
    const fixture = writeFixtureParquet(path.join(dir, 'bv.parquet'), { rows: 1 });
    policy = await startVllmPolicyServer(scripts.demo(Object.fromEntries(fixture.expected.map((t) => [t.question, t.gold]))));
    const output = path.join(dir, 'out', 'bv.jsonl');
    const result = await runCli([
      'run', '--benchmark', 'babyvision_opencode',
      `++babyvision_parquet=${fixture.path}`, `++data_dir=${path.join(dir, 'data')}`, `++state_dir=${path.join(dir, 'state')}`,
      `++output_jsonl_fpath=${output}`, `++policy_base_url=${policy.url}`, '++policy_model_name=toy', `++visual_coding_opencode_judge_base_url=${judge.url}`,
      '++task_timeout_s=240', '++queues.prefix=vcftest-runtc', '++policy.token_capture=true', '++policy.sampling.temperature=1.0', '++policy.weight_version=step-7',
    ], { POLICY_API_KEY: POLICY_KEY, OPENAI_API_KEY: 'sk-judge-x' });
    expect(result.code, result.output).toBe(0);
    const [row] = readFileSync(output, 'utf8').trim().split('\n').map((l) => RowSchema.parse(JSON.parse(l)));
    expect(row).toMatchObject({ stop_reason: 'answered', reward: 1, token_capture: { calls: 2, contiguous: true, mask_sample: false, mask_reason: null } });
    expect(row.trajectory).toBe(`bv_trajectories/${row.rollout_id.replace(/[^A-Za-z0-9_.-]/g, '_')}.json`);
    const text = readFileSync(path.join(dir, 'out', row.trajectory!), 'utf8');
    expect(text).not.toContain(POLICY_KEY);
    const t = TrajectorySchema.parse(JSON.parse(text));
    expect(t).toMatchObject({ reward: 1, weight_version: 'step-7', mask_sample: false, flat_calls: 2 });
    expect(t.calls.every((c) => c.sampling.temperature === 1 && c.weight_version === 'step-7')).toBe(true);
    expect(t.response_ids.length).toBe(t.response_mask.length);
    expect(t.response_logprobs.length).toBe(t.response_ids.length);
    expect(t.images.length).toBeGreaterThan(0);
    for (const sha of t.images) expect(existsSync(path.join(dir, 'out', 'bv_transcripts', 'images', `${sha}.png`))).toBe(true);
  });
});
