/**
 * `vcfleet export` on a run made by the real fleet: `vcfleet run ++policy.token_capture=true` (the real
 * OpenCode in a `local` sandbox, the vLLM-shaped scripted policy, the scripted judge) over two puzzles,
 * one answered right and one wrong; then `vcfleet export --format gym` and `--format tokens` as their
 * own processes, checked against the run's own rows, transcripts and trajectories. Then bad input: a
 * damaged copy of the run (lines that are not rows, a line past the bound, paths that lead out of the
 * run's folders, a corrupt trajectory, another rollout's transcript, a rejudged masked line) exports
 * what it can and names each problem; a missing file and a run without trajectories are clear errors.
 */
import { appendFileSync, cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportRun, summaryLine } from '../../src/export/run-export.ts';
import type { GymRow } from '../../src/shared/output/gym-row.ts';
import type { TokenRecord } from '../../src/shared/output/token-record.ts';
import { RowSchema, type Row } from '../../src/shared/records/rows.ts';
import { TranscriptRecordSchema } from '../../src/shared/records/transcript.ts';
import type { StepRecord } from '../../src/shared/output/step-records.ts';
import { TrajectorySchema, type Trajectory } from '../../src/shared/records/trajectory.ts';
import { writeFixtureParquet } from '../helpers/fixture-parquet.ts';
import { scripts } from '../helpers/scripted-policy-server.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { startVllmPolicyServer, type VllmPolicyServer } from '../helpers/vllm-policy-server.ts';
import { runCli } from '../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';

const POLICY_KEY = 'sk-policy-EXPORT-77';
const readLines = <T>(file: string): T[] => readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as T);

describe('vcfleet export', () => {
  let policy: VllmPolicyServer;
  const judge = useScriptedJudge();
  let dir: string;
  let output: string;
  let rows: Row[];
  let puzzle: Map<string, string>; // task id -> gold

  beforeAll(async () => {
    dir = createTmpDir('vcfleet-export-');
    const fixture = writeFixtureParquet(path.join(dir, 'bv.parquet'), { rows: 2 });
    const [right] = fixture.expected;
    puzzle = new Map(fixture.expected.map((t) => [t.task_id, t.gold]));
    policy = await startVllmPolicyServer(scripts.demo({ [right.question]: right.gold }, { fallback: 'Z' }));
    output = path.join(dir, 'out', 'bv.jsonl');
    const result = await runCli([
      'run', '--benchmark', 'babyvision_opencode',
      `++babyvision_parquet=${fixture.path}`, `++data_dir=${path.join(dir, 'data')}`, `++state_dir=${path.join(dir, 'state')}`,
      `++output_jsonl_fpath=${output}`, `++policy_base_url=${policy.url}`, '++policy_model_name=toy', `++visual_coding_opencode_judge_base_url=${judge.url}`,
      '++task_timeout_s=240', '++queues.prefix=vcftest-export', '++policy.token_capture=true', '++policy.sampling.temperature=1.0', '++policy.weight_version=step-3',
    ], { POLICY_API_KEY: POLICY_KEY, OPENAI_API_KEY: 'sk-judge-x' });
    expect(result.code, result.output).toBe(0);
    rows = readLines<unknown>(output).map((r) => RowSchema.parse(r));
    expect(rows.map((r) => r.reward).sort()).toEqual([0, 1]);
  }, 240_000);
  afterAll(async () => {
    await policy?.close();
    removeTmpDirs();
  });

  const trajectoryOf = (row: Row): Trajectory => TrajectorySchema.parse(JSON.parse(readFileSync(path.join(dir, 'out', row.trajectory!), 'utf8')));

  it('--format gym writes one verify-response row per row, built from the transcript and the trajectory', async () => {
    const res = await runCli(['export', output, '--format', 'gym']);
    expect(res.code, res.output).toBe(0);
    const out = path.join(dir, 'out', 'bv.gym.jsonl');
    const side = (name: string) => path.join(dir, 'out', `bv.gym_${name}`);
    expect(res.stdout.trim()).toBe(
      `wrote 2 gym rows of 2 rollouts to ${out}; skipped none; 0 masked rows to ${side('failures.jsonl')}; NeMo Gym's metrics and inputs to ${side('aggregate_metrics.json')}, ${side('materialized_inputs.jsonl')}`,
    );
    // NeMo Gym's files beside the rows: no failures, one materialized input per row (task and rollout index, as resume and reverify pair them), its metrics' shape
    expect(readFileSync(side('failures.jsonl'), 'utf8')).toBe('');
    const inputs = readLines<Record<string, unknown>>(side('materialized_inputs.jsonl'));
    expect(inputs.map((i) => [i._ng_task_index, i._ng_rollout_index, i.source_id, i.agent_ref])).toEqual(rows.map((r, k) => [k, 0, r.task_id, { name: 'vcfleet_opencode_agent' }]));
    const metrics = JSON.parse(readFileSync(side('aggregate_metrics.json'), 'utf8')) as Array<Record<string, any>>;
    expect(metrics).toHaveLength(1);
    expect(metrics[0]).toMatchObject({ agent_ref: { name: 'vcfleet_opencode_agent' }, key_metrics: { 'mean/reward': 0.5 }, agent_metrics: { 'mean/reward': 0.5, 'max/reward': 1, 'min/reward': 0, 'mean/turns_used': 2 } });
    expect(metrics[0].group_level_metrics.map((g: Record<string, number>) => [g._ng_task_index, g.num_rollouts])).toEqual([[0, 1], [1, 1]]);
    // --agent-name: the agent of the Gym config that reads the rows (gym eval aggregate posts to it).
    const named = path.join(dir, 'out', 'named.jsonl');
    expect((await runCli(['export', output, '--format', 'gym', '--agent-name', 'babyvision_agent', '--out', named])).code).toBe(0);
    for (const file of [named, named.replace(/\.jsonl$/, '_materialized_inputs.jsonl')]) {
      expect(readLines<Record<string, any>>(file).map((g) => g.agent_ref)).toEqual(rows.map(() => ({ name: 'babyvision_agent' })));
    }
    const text = readFileSync(out, 'utf8');
    expect(text).not.toContain(POLICY_KEY);
    const gym = readLines<GymRow>(out);
    expect(gym.map((g) => g.rollout_id)).toEqual(rows.map((r) => r.rollout_id));
    for (const [i, g] of gym.entries()) {
      const row = rows[i];
      const transcript = TranscriptRecordSchema.parse(JSON.parse(readFileSync(path.join(dir, 'out', row.transcript!), 'utf8')));
      const t = trajectoryOf(row);
      const right = row.reward === 1;
      expect(g).toMatchObject({
        reward: row.reward, expected_answer: puzzle.get(row.task_id), question: transcript.task.question, extracted_answer: right ? puzzle.get(row.task_id) : 'Z',
        judge_verdict: right ? 'equivalent' : 'different', failure_reason: right ? null : 'incorrect_answer', turns_used: 2, finished_naturally: true,
        source_id: row.task_id, category: row.type, l2_category: row.subtype, ans_type: row.ans_type, _ng_rollout_index: 0, mask_sample: false, run_id: row.run_id,
        _ng_task_index: i, agent_ref: { name: 'vcfleet_opencode_agent' }, instance_config: { mask_sample: false },
      });
      expect(g).not.toHaveProperty('_ng_failure_class');
      // the dataset row: the puzzle (the very bytes of the run's image file) as a data URL, then the prompt
      const [message] = g.responses_create_params.input as Array<{ content: Array<{ type: string; image_url?: string; text?: string }> }>;
      const image = readFileSync(path.join(dir, 'out', 'bv_transcripts', 'images', `${transcript.task.image_sha256}.png`));
      expect(message.content[0]).toEqual({ type: 'input_image', image_url: `data:image/png;base64,${image.toString('base64')}`, detail: 'auto' });
      expect(message.content[1]).toEqual({ type: 'input_text', text: transcript.task.prompt });
      expect(g.responses_create_params.temperature).toBe(1);
      // the output: the tool call turn, the tool's result, the answer; each call's tokens on its last item
      const items = g.response.output;
      expect(items.map((o) => o.type)).toEqual(['message', 'function_call', 'function_call_output', 'message']);
      expect(items[0]).toMatchObject({ role: 'assistant', content: [{ type: 'output_text', text: 'I will check the image size first.' }] });
      expect(items[0]).not.toHaveProperty('prompt_token_ids');
      expect(items[1]).toMatchObject({ name: 'bash', call_id: transcript.turns[0].tool_calls[0].id });
      expect(items[2]).toMatchObject({ call_id: transcript.turns[0].tool_calls[0].id, output: transcript.turns[0].tool_calls[0].output });
      expect((items[3] as { content: Array<{ text: string }> }).content[0].text).toContain(`\\boxed{${right ? puzzle.get(row.task_id) : 'Z'}}`);
      const [c0, c1] = t.calls;
      expect(items[1]).toMatchObject({ prompt_token_ids: c0.prompt_token_ids, generation_token_ids: c0.generation_token_ids, generation_log_probs: c0.generation_log_probs });
      expect(items[3]).toMatchObject({ prompt_token_ids: [...c0.prompt_token_ids!, ...c0.generation_token_ids!, ...c1.inserted_token_ids!], generation_token_ids: c1.generation_token_ids });
      // NeMo RL's check: the second call's prompt extends the first call's prompt + generation
      expect(t.prompt_ids).toEqual(c0.prompt_token_ids);
      expect(g.response).toMatchObject({ object: 'response', model: 'toy', status: 'completed', usage: { input_tokens: row.input_tokens, output_tokens: row.output_tokens } });
    }
  }, 240_000);

  it('--format tokens writes the flat form of each trajectory, with the images by absolute path', async () => {
    const out = path.join(dir, 'tokens', 'flat.jsonl');
    const missingDir = await runCli(['export', output, '--format', 'tokens', '--out', out]);
    expect(missingDir.code).toBe(2);
    expect(missingDir.output).toContain(`its folder ${path.dirname(out)} does not exist`);
    mkdirSync(path.dirname(out));
    const res = await runCli(['export', output, '--format', 'tokens', '--out', out]);
    expect(res.code, res.output).toBe(0);
    expect(res.stdout.trim()).toBe(`wrote 2 token records of 2 rollouts to ${out}; skipped none`);
    const records = readLines<TokenRecord>(out);
    for (const [i, r] of records.entries()) {
      const t = trajectoryOf(rows[i]);
      expect(r).toEqual({
        run_id: rows[i].run_id, rollout_id: rows[i].rollout_id, task_id: rows[i].task_id, repeat: 0, weight_version: 'step-3',
        prompt_ids: t.prompt_ids, response_ids: t.response_ids, response_mask: t.response_mask, response_logprobs: t.response_logprobs,
        reward: rows[i].reward, images: r.images, flat_calls: 2, contiguous: true, truncated: false, mask_sample: false, mask_reason: null,
      });
      expect(r.response_mask.filter((m) => m === 1).length).toBe(t.calls.reduce((n, c) => n + (c.generation_token_ids?.length ?? 0), 0));
      expect(r.images.length).toBe(t.images.length);
      for (const [k, p] of r.images.entries()) {
        expect(path.isAbsolute(p)).toBe(true);
        expect(p.endsWith(`${t.images[k]}.png`) && existsSync(p)).toBe(true);
      }
    }
  }, 240_000);

  it('--format steps writes one record per policy call: its prompt as the server saw it, the generation, the reward', async () => {
    const out = path.join(dir, 'steps.jsonl');
    const res = await runCli(['export', output, '--format', 'steps', '--out', out]);
    expect(res.code, res.output).toBe(0);
    expect(res.stdout.trim()).toBe(`wrote 4 step records of 2 rollouts to ${out}; skipped none`);
    const records = readLines<StepRecord>(out);
    for (const [i, row] of rows.entries()) {
      const t = trajectoryOf(row);
      const steps = records.filter((r) => r.rollout_id === row.rollout_id);
      expect(steps.map((r) => [r.step, r.steps, r.reward, r.extends_previous])).toEqual([[0, 2, rows[i].reward, true], [1, 2, rows[i].reward, true]]);
      // The steps and the flat form are the same ids: the last step's prompt + generation is the flat prompt + response.
      expect([...steps[1].prompt_token_ids, ...steps[1].generation_token_ids]).toEqual([...t.prompt_ids, ...t.response_ids]);
      expect(steps[0].prompt_token_ids).toEqual(t.prompt_ids);
      expect(steps[1].generation_log_probs).toEqual(t.calls.filter((c) => c.answered)[1].generation_log_probs);
    }
  }, 240_000);

  it('a rollout whose chain broke is skipped as partial by --format tokens unless --include-partial, and kept whole by --format steps', async () => {
    const part = path.join(dir, 'partial');
    cpSync(path.join(dir, 'out'), part, { recursive: true });
    const jsonl = path.join(part, 'bv.jsonl');
    const [first] = rows;
    const t = trajectoryOf(first);
    const [c0, c1] = t.calls.filter((c) => c.answered);
    // As a template that re-renders the earlier turn differently leaves it: the second call's whole prompt, the flat form its first call.
    const prompt1 = [...c0.prompt_token_ids!, ...c0.generation_token_ids!.slice(0, -1), 999_999, ...c1.inserted_token_ids!];
    const broken: Trajectory = {
      ...t, chain: { contiguous: false, breaks: [{ call: c1.index, token: 5, why: 'differs' }] }, flat_calls: 1,
      calls: t.calls.map((c) => (c.index === c1.index ? { ...c, inserted_token_ids: undefined, prompt_token_ids: prompt1 } : c)),
      response_ids: c0.generation_token_ids!, response_mask: c0.generation_token_ids!.map(() => 1 as const), response_logprobs: c0.generation_log_probs!,
    };
    writeFileSync(path.join(part, first.trajectory!), JSON.stringify(broken));
    const tokens = await exportRun({ jsonl, format: 'tokens' });
    expect(tokens).toMatchObject({ rows: 2, written: 1, skipped: { partial: 1 } });
    expect(summaryLine(tokens)).toContain('1 not contiguous (a broken chain');
    const kept = await exportRun({ jsonl, format: 'tokens', includePartial: true, out: path.join(part, 'kept.jsonl') });
    expect(kept).toMatchObject({ written: 2, skipped: {} });
    expect(readLines<TokenRecord>(path.join(part, 'kept.jsonl')).find((r) => r.rollout_id === first.rollout_id)).toMatchObject({ contiguous: false, flat_calls: 1, mask_sample: false, reward: first.reward });
    const steps = await exportRun({ jsonl, format: 'steps' });
    expect(steps).toMatchObject({ written: 4, skipped: {} });
    const mine = readLines<StepRecord>(steps.out).filter((r) => r.rollout_id === first.rollout_id);
    expect(mine.map((r) => [r.extends_previous, r.prompt_token_ids])).toEqual([[true, c0.prompt_token_ids], [false, prompt1]]);
  }, 240_000);

  it('exports what it can of a damaged run and names every problem; masked rows are skipped unless asked for', async () => {
    const bad = path.join(dir, 'bad');
    cpSync(path.join(dir, 'out'), bad, { recursive: true });
    const jsonl = path.join(bad, 'bv.jsonl');
    const [first, second] = rows;
    const secret = path.join(dir, 'secret.json');
    writeFileSync(secret, JSON.stringify(trajectoryOf(first)));
    const fake = (id: string, over: Partial<Row>) => JSON.stringify({ ...first, rollout_id: id, ...over });
    // the second rollout's trajectory is corrupt; the first is rejudged on a later line and comes back masked
    writeFileSync(path.join(bad, second.trajectory!), '{"trajectory_version": 1, "calls": [');
    appendFileSync(jsonl, [
      'not json at all',
      `{"pad": "${'x'.repeat(1024 * 1024 + 10)}"}`,
      fake('escape', { trajectory: '../secret.json', transcript: '../../etc/passwd.json' }),
      fake('other', { trajectory: first.trajectory, transcript: first.transcript }),
      JSON.stringify({ ...first, reward: null, judge_verdict: null, judge_reason: null, failure_kind: 'judge_failed', judge_failure: 'unavailable', error: 'the judge is unavailable' }),
      '',
    ].join('\n'));
    const tokens = await exportRun({ jsonl, format: 'tokens' });
    expect(tokens).toMatchObject({
      rows: 4, written: 0, writtenMasked: 0, replacedLines: 1,
      skipped: { bad_line: 2, bad_trajectory: 3, masked: 1 }, maskReasons: { judge_failed: 1 },
    });
    const problems = tokens.problems.join('\n');
    expect(problems).toMatch(/line 3: not JSON/);
    expect(problems).toMatch(/line 4: longer than 1048576 bytes/);
    expect(problems).toMatch(/rollout escape \(line 5\): its trajectory path "..\/secret.json" is not a .json file directly in .*bv_trajectories/);
    expect(problems).toMatch(/rollout other \(line 6\): its trajectory .* holds rollout .* not this one/);
    expect(problems).toContain(`rollout ${second.rollout_id} (line ${rows.indexOf(second) + 1}): its trajectory`);
    expect(problems).toMatch(/is not JSON/);
    expect(readFileSync(path.join(bad, 'bv.tokens.jsonl'), 'utf8')).toBe('');
    const kept = await exportRun({ jsonl, format: 'tokens', includeMasked: true, out: path.join(bad, 'kept.jsonl') });
    expect(kept).toMatchObject({ written: 1, writtenMasked: 1 });
    expect(readLines<TokenRecord>(path.join(bad, 'kept.jsonl'))[0]).toMatchObject({ rollout_id: first.rollout_id, reward: null, mask_sample: true, mask_reason: 'judge_failed' });

    // gym: the masked row goes to the failures file, flagged where both NeMo Gym and NeMo RL look; the corrupt trajectory and the foreign records are named
    const gym = await exportRun({ jsonl, format: 'gym' });
    expect(gym).toMatchObject({ rows: 4, written: 0, writtenMasked: 0, failures: { file: path.join(bad, 'bv.gym_failures.jsonl'), rows: 1 }, skipped: { bad_line: 2, bad_transcript: 2, bad_trajectory: 1 } });
    expect(readFileSync(path.join(bad, 'bv.gym.jsonl'), 'utf8')).toBe('');
    const [masked] = readLines<GymRow>(path.join(bad, 'bv.gym_failures.jsonl'));
    expect(masked).toMatchObject({
      rollout_id: first.rollout_id, reward: 0, mask_sample: true, instance_config: { mask_sample: true }, _ng_failure_class: 'judge_failed', failure_reason: 'judge_error',
      _ng_task_index: 0, _ng_rollout_index: 0, agent_ref: { name: 'vcfleet_opencode_agent' },
    });
    // masked rows are not in NeMo Gym's metrics
    expect(JSON.parse(readFileSync(path.join(bad, 'bv.gym_aggregate_metrics.json'), 'utf8'))).toEqual([]);
    expect(readFileSync(path.join(bad, 'bv.gym_failures.jsonl'), 'utf8')).not.toContain('passwd');
    expect(existsSync(secret)).toBe(true);
  }, 240_000);

  it('says clearly when the file is missing, the run is not in it, or the run kept no trajectories', async () => {
    await expect(exportRun({ jsonl: path.join(dir, 'nope.jsonl'), format: 'gym' })).rejects.toThrow(/nope.jsonl does not exist: pass the output JSONL of a run/);
    await expect(exportRun({ jsonl: output, format: 'gym', runId: 'other-run' })).rejects.toThrow(`run other-run is not in ${output}; it holds ${rows[0].run_id}`);
    expect(await exportRun({ jsonl: output, format: 'gym', runId: rows[0].run_id, out: path.join(dir, 'one.jsonl') })).toMatchObject({ rows: 2, written: 2 });
    const plain = path.join(dir, 'plain.jsonl');
    writeFileSync(plain, rows.map((r) => `${JSON.stringify({ ...r, trajectory: null, token_capture: null })}\n`).join(''));
    const res = await runCli(['export', plain, '--format', 'tokens']);
    expect(res.code).toBe(2);
    expect(res.output).toContain(`no row of ${plain} has a trajectory: token capture was off. Run with ++policy.token_capture=true`);
    expect(existsSync(path.join(dir, 'plain.tokens.jsonl'))).toBe(false);
    const format = await runCli(['export', plain, '--format', 'verl']);
    expect(format.code).toBe(2);
    expect(format.output).toContain('--format must be gym, tokens or steps, not "verl"');
  }, 240_000);
});
