/**
 * A rollout the model ended is trained on with its reward, never masked: `vcfleet run
 * ++policy.token_capture=true` as its own OS process (the real OpenCode in a real `local` sandbox)
 * against the server with Qwen3's real template and tokenizer (test/helpers/qwen3-policy-server.ts)
 * over four puzzles, each ended by the model: a give-up (no answer), a self-made timeout (`sleep`),
 * a context overflow (`cat` of a huge output, refused by the server for its context length) and an
 * output cap. Each row scores 0 with `mask_sample: false`, and `vcfleet export --format tokens`
 * keeps all four. (The masks that remain are the server's and the infrastructure's: missing token
 * fields and the image budget in token-capture-gateway.test.ts, the record's bound in
 * trajectory-codec.test.ts.)
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RowSchema } from '../../src/shared/records/rows.ts';
import type { TokenRecord } from '../../src/shared/output/token-record.ts';
import { writeFixtureParquet } from '../helpers/fixture-parquet.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { startQwen3PolicyServer, type Qwen3PolicyServer, type Qwen3Reply } from '../helpers/qwen3-policy-server.ts';
import { runCli } from '../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';

const POLICY_KEY = 'sk-policy-MODELENDS-33';
const bash = (command: string) => `<tool_call>\n{"name": "bash", "arguments": {"command": "${command}", "description": "Check"}}\n</tool_call>`;

type Json = Record<string, unknown>;
const textOf = (m: Json) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? ''));

/** By puzzle: 1 gives up, 2 sleeps past the task timeout, 3 prints more than the context holds, 4 hits the output cap. */
function model(messages: readonly Json[]): Qwen3Reply {
  const user = messages.filter((m) => m.role === 'user').map(textOf).join('\n');
  const tools = messages.filter((m) => m.role === 'tool');
  if (user.includes('Puzzle 1:')) return tools.length === 0 ? bash('echo nothing') : 'I cannot tell from the picture.';
  if (user.includes('Puzzle 2:')) return bash('sleep 1000');
  if (user.includes('Puzzle 3:')) {
    if (tools.some((m) => textOf(m).length > 5_000)) return { status: 400, message: "This model's maximum context length is 40960 tokens. However, your request has 52011 input tokens." };
    return bash("python3 -c 'print(\\\"word \\\" * 40000)'");
  }
  return { raw: 'Let me think about every part of the picture, one by one, and', cut: true };
}

describe('token capture: a rollout the model ended stays trainable', () => {
  let policy: Qwen3PolicyServer;
  const judge = useScriptedJudge();
  beforeAll(async () => {
    policy = await startQwen3PolicyServer(model);
  });
  afterAll(async () => {
    await policy.close();
    removeTmpDirs();
  });

  it('a give-up, a self-made timeout, a context overflow and an output cap score 0, unmasked, and the export keeps them', async () => {
    const dir = createTmpDir('vcfleet-model-ends-');
    const fixture = writeFixtureParquet(path.join(dir, 'bv.parquet'), { rows: 4 });
    const output = path.join(dir, 'out', 'bv.jsonl');
    const result = await runCli([
      'run', '--benchmark', 'babyvision_opencode',
      `++babyvision_parquet=${fixture.path}`, `++data_dir=${path.join(dir, 'data')}`, `++state_dir=${path.join(dir, 'state')}`,
      `++output_jsonl_fpath=${output}`, `++policy_base_url=${policy.url}`, '++policy_model_name=qwen3', `++visual_coding_opencode_judge_base_url=${judge.url}`,
      '++task_timeout_s=60', '++queues.prefix=vcftest-modelends', '++policy.token_capture=true',
    ], { POLICY_API_KEY: POLICY_KEY, OPENAI_API_KEY: 'sk-judge-x' });
    expect(result.code, result.output).toBe(0);
    const rows = readFileSync(output, 'utf8').trim().split('\n').map((l) => RowSchema.parse(JSON.parse(l)));
    const byPuzzle = new Map(rows.map((r) => [Number(/Puzzle (\d+)/.exec(fixture.expected.find((e) => e.task_id === r.task_id)!.question)![1]), r]));
    expect([1, 2, 3, 4].map((k) => byPuzzle.get(k)?.stop_reason)).toEqual(['no_answer', 'timeout', 'context_limit', 'output_cap']);
    for (const row of rows) {
      expect(row, row.rollout_id).toMatchObject({ reward: 0, failure_kind: null, token_capture: { mask_sample: false, mask_reason: null } });
    }
    const res = await runCli(['export', output, '--format', 'tokens']);
    expect(res.code, res.output).toBe(0);
    expect(res.stdout.trim()).toBe(`wrote 4 token records of 4 rollouts to ${path.join(dir, 'out', 'bv.tokens.jsonl')}; skipped none`);
    const records = readFileSync(path.join(dir, 'out', 'bv.tokens.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as TokenRecord);
    for (const r of records) {
      expect(r).toMatchObject({ reward: 0, mask_sample: false, mask_reason: null, contiguous: true });
      expect(r.response_mask.filter((m) => m === 1).length).toBeGreaterThan(0);
    }
  }, 600_000);
});
