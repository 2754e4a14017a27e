/**
 * `vcfleet serve --with-workers` as its own OS process, as a trainer drives it: the real OpenCode in
 * real `local` sandboxes against the vLLM-shaped scripted policy (token capture on), a scripted
 * judge. Several `POST /run` at once answer with NeMo Gym's verify-response row (the transcript's
 * items in order, each call's token ids on its last item, the request's fields repeated); the same
 * `_ng_rollout_id` asked again returns the same response without a second rollout; a client whose
 * connection dropped gets its result with `GET /rollouts/{id}` (202 at once with `?wait=0` while it
 * runs); `DELETE` stops a running rollout's sandbox and its row says so, masked; every row lands in
 * the run's JSONL. An image the model `read` is in the response's tool result, once per image span
 * of the next prompt (where NeMo RL's image binning looks).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RowSchema } from '../../src/shared/records/rows.ts';
import { CANCELLED_ERROR } from '../../src/shared/records/request-task.ts';
import { scripts, userText, type Script } from '../helpers/scripted-policy-server.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { startVllmPolicyServer, type VllmPolicyServer } from '../helpers/vllm-policy-server.ts';
import { REDIS_URL, startCli, waitFor, type CliProcess } from '../helpers/fleet.ts';
import { processesMatching } from '../helpers/processes.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';
import { createRedis } from '../../src/shared/redis/connect.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { gymRow, pngUrl } from '../helpers/serve.ts';

const POLICY_KEY = 'sk-policy-SERVE-25';
const prefix = `vcftest-serve-${process.pid}`;
const runId = `serve-test-${process.pid}`;

type Json = Record<string, any>;

describe('vcfleet serve --with-workers, the real OpenCode behind it', () => {
  let policy: VllmPolicyServer;
  const judge = useScriptedJudge();
  let serve: CliProcess;
  let url: string;
  let output: string;
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const callsFor = (marker: string) => policy.requests.filter((b) => userText(b).includes(marker)).length;

  beforeAll(async () => {
    const dir = createTmpDir('vcfleet-serve-');
    output = path.join(dir, 'out', 'serve.jsonl');
    const readThenAnswer = scripts.readImageThenAnswer('F');
    const answers = scripts.demo({ 'serve-one': 'A', 'serve-two': 'B', 'serve-three': 'C', 'serve-slow': 'D', 'serve-hang': 'E' });
    const script: Script = async (body, i, ctx) => {
      const text = userText(body);
      // A rollout that is cancelled: its first call never answers (until the test ends).
      if (text.includes('serve-hang')) await held;
      if (text.includes('serve-slow')) await new Promise((r) => setTimeout(r, 2500));
      if (text.includes('serve-read')) return readThenAnswer(body, i, ctx);
      return answers(body, i, ctx);
    };
    policy = await startVllmPolicyServer(script);
    serve = startCli([
      'serve', '--with-workers', '--port', '0', '--run-id', runId,
      `++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`, `++state_dir=${path.join(dir, 'state')}`, `++output_jsonl_fpath=${output}`,
      `++policy_base_url=${policy.url}`, '++policy_model_name=toy', `++visual_coding_opencode_judge_base_url=${judge.url}`,
      '++task_timeout_s=200', '++policy.token_capture=true', '++queues.rollout_concurrency=4', '++queues.lock_duration_ms=5000',
    ], { POLICY_API_KEY: POLICY_KEY, OPENAI_API_KEY: 'sk-judge-serve' });
    url = (await waitFor('serve to print its URL', () => /serve: (http:\/\/\S+\/) /.exec(serve.stdout())?.[1], 60_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${serve.output()}`);
    }));
  }, 120_000);

  afterAll(async () => {
    release();
    serve?.child.kill('SIGTERM');
    await serve?.exited;
    await policy?.close();
    const redis = createRedis(REDIS_URL, 'client');
    await deletePrefix(redis, prefix);
    redis.disconnect();
    removeTmpDirs();
  }, 60_000);

  const run = async (body: unknown, signal?: AbortSignal): Promise<{ status: number; json: Json }> => {
    const res = await fetch(`${url}run`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, signal });
    return { status: res.status, json: (await res.json()) as Json };
  };
  const rows = () => readFileSync(output, 'utf8').trim().split('\n').map((l) => RowSchema.parse(JSON.parse(l)));

  it('answers concurrent POST /run with the verify-response row; the same id again gives the same response, no second rollout', async () => {
    const bodies = [
      gymRow('Puzzle serve-one: which option?', 'A', { _ng_rollout_id: 'one-0', _ng_task_index: 0, _ng_rollout_index: 0, source_id: 'p1', category: 'Fine-grained Discrimination', l2_category: 'Find the same', ans_type: 'choice', policy: { weight_version: 'step-3' } }, [pngUrl(11, 16)]),
      gymRow('Puzzle serve-two: which option?', 'B', { _ng_rollout_id: 'two-0', _ng_task_index: 1, responses_create_params: undefined }),
      gymRow('Puzzle serve-three: how many?', '7', { _ng_rollout_id: 'three-0', _ng_task_index: 2 }, [pngUrl(12), pngUrl(13)]),
    ];
    bodies[1].responses_create_params = { ...(gymRow('Puzzle serve-two: which option?', 'B').responses_create_params as Json), temperature: 0.7, top_p: 0.9, max_output_tokens: 2048 };
    const answers = await Promise.all(bodies.map((b) => run(b)));
    for (const a of answers) expect(a.status, JSON.stringify(a.json).slice(0, 500)).toBe(200);
    const [one, two, three] = answers.map((a) => a.json);
    expect(one).toMatchObject({
      reward: 1, expected_answer: 'A', extracted_answer: 'A', judge_verdict: 'equivalent', failure_reason: null, finished_naturally: true, mask_sample: false,
      question: 'Puzzle serve-one: which option?', source_id: 'p1', category: 'Fine-grained Discrimination', l2_category: 'Find the same', ans_type: 'choice',
      _ng_task_index: 0, _ng_rollout_index: 0, _ng_rollout_id: 'one-0', rollout_id: `${runId}-ng-one-0`, weight_version: 'step-3',
    });
    expect(two.weight_version).toBeUndefined();
    expect(one.responses_create_params).toEqual(bodies[0].responses_create_params);
    expect(one.turns_used).toBe(2);
    const items = one.response.output as Json[];
    expect(items.map((i) => i.type)).toEqual(['message', 'function_call', 'function_call_output', 'message']);
    expect(items[1]).toMatchObject({ name: 'bash' });
    expect(items[2].output).toMatch(/size 16 16/);
    expect(items[3].content[0].text).toMatch(/\\boxed\{A\}/);
    // Each policy call's last item carries its token ids (token capture); the others carry none.
    for (const i of [1, 3]) {
      expect(items[i].prompt_token_ids.length).toBeGreaterThan(0);
      expect(items[i].generation_token_ids.length).toBe(items[i].generation_log_probs.length);
    }
    expect(items[0].prompt_token_ids).toBeUndefined();
    expect(three).toMatchObject({ reward: 0, expected_answer: '7', extracted_answer: 'C', judge_verdict: 'different', failure_reason: 'incorrect_answer', mask_sample: false });
    expect(two).toMatchObject({ reward: 1, _ng_rollout_id: 'two-0' });
    // The gateway pinned the request's sampling on every call of its rollout; the weight version rode along.
    const twoCalls = policy.requests.filter((b) => userText(b).includes('serve-two'));
    expect(twoCalls.length).toBe(2);
    for (const b of twoCalls) expect(b).toMatchObject({ temperature: 0.7, top_p: 0.9, max_tokens: 2048 });
    // Both images of the third row reached the model's first call.
    const first = policy.requests.find((b) => userText(b).includes('serve-three'))!;
    expect(JSON.stringify(first.messages).match(/"type":"image_url"/g)?.length).toBe(2);
    expect(JSON.stringify(answers)).not.toContain(POLICY_KEY);

    const calls = policy.requests.length;
    const again = await run(bodies[0]);
    expect(again.status).toBe(200);
    expect(again.json).toEqual(one);
    expect(policy.requests.length).toBe(calls);
    const byId = await fetch(`${url}rollouts/one-0`);
    expect(await byId.json()).toEqual(one);

    const written = await waitFor('the three rows in the JSONL', () => { try { const r = rows(); return r.length >= 3 ? r : undefined; } catch { return undefined; } });
    expect(written.map((r) => r.rollout_id).sort()).toEqual([`${runId}-ng-one-0`, `${runId}-ng-three-0`, `${runId}-ng-two-0`]);
    expect(written.find((r) => r.rollout_id.endsWith('one-0'))).toMatchObject({ reward: 1, task_id: 'p1', type: 'Fine-grained Discrimination', expected_answer: 'A', weight_version: 'step-3' });
  }, 240_000);

  it('a dropped connection loses nothing: GET /rollouts/{id} answers 202 with ?wait=0 while it runs, then the result', async () => {
    const body = gymRow('Puzzle serve-slow: which option?', 'D', { _ng_rollout_id: 'slow-0' });
    const abort = new AbortController();
    const dropped = run(body, abort.signal).catch((err: Error) => err);
    await waitFor('the slow rollout to reach the policy', () => callsFor('serve-slow') > 0, 120_000);
    abort.abort();
    expect(await dropped).toBeInstanceOf(Error);
    const pending = await fetch(`${url}rollouts/slow-0?wait=0`);
    expect(pending.status).toBe(202);
    expect(await pending.json()).toMatchObject({ status: 'pending', _ng_rollout_id: 'slow-0' });
    const done = await fetch(`${url}rollouts/slow-0`);
    expect(done.status).toBe(200);
    expect(await done.json()).toMatchObject({ reward: 1, extracted_answer: 'D', _ng_rollout_id: 'slow-0' });
  }, 240_000);

  it('DELETE /rollouts/{id} stops a running rollout: its sandbox goes, its row says so, masked and not scored', async () => {
    const body = gymRow('Puzzle serve-hang: which option?', 'E', { _ng_rollout_id: 'hang-0' });
    const answer = run(body);
    await waitFor('the rollout to reach the policy', () => callsFor('serve-hang') > 0, 120_000);
    const rolloutId = `${runId}-ng-hang-0`;
    expect(processesMatching(rolloutId).length).toBeGreaterThan(0);
    const cancel = await fetch(`${url}rollouts/hang-0`, { method: 'DELETE' });
    expect(cancel.status).toBe(202);
    const { status, json } = await answer;
    expect(status).toBe(200);
    expect(json).toMatchObject({ reward: 0, mask_sample: true, _ng_failure_class: 'infra_failed', _ng_failure_terminal: true, failure_reason: 'infra_error', failure_detail: CANCELLED_ERROR, _ng_rollout_id: 'hang-0' });
    await waitFor('the sandbox of the cancelled rollout to be gone', () => processesMatching(rolloutId).length === 0, 30_000);
    const row = await waitFor('its row', () => { try { return rows().find((r) => r.rollout_id === rolloutId); } catch { return undefined; } });
    expect(row).toMatchObject({ failure_kind: 'infra_failed', error: CANCELLED_ERROR, reward: null });
    expect((await fetch(`${url}rollouts/hang-0`, { method: 'DELETE' })).status).toBe(409);
  }, 240_000);

  it("an image the model read is in the response after its function_call_output (a user message of input_image parts), once per image span of the next prompt", async () => {
    const body = gymRow('Puzzle serve-read: which option?', 'F', { _ng_rollout_id: 'read-0', _ng_task_index: 5 }, [pngUrl(21, 16)]);
    const { status, json } = await run(body);
    expect(status, JSON.stringify(json).slice(0, 500)).toBe(200);
    const items = json.response.output as Json[];
    expect(items.map((i) => `${i.type}${i.role ? `:${i.role}` : ''}`)).toEqual(['function_call', 'function_call_output', 'message:user', 'message:assistant']);
    expect(json.turns_used).toBe(1);
    expect(json.finished_naturally).toBe(true);
    // The next prompt, as the policy server got it: the image parts after the model's tool call.
    const calls = policy.requests.filter((b) => userText(b).includes('serve-read'));
    expect(calls.length).toBe(2);
    const messages = calls[1].messages as Json[];
    const afterCall = messages.slice(messages.findLastIndex((m) => m.role === 'assistant') + 1);
    const spans = afterCall.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((p: Json) => p.type === 'image_url').map((p: Json) => p.image_url.url as string);
    expect(spans.length).toBeGreaterThan(0);
    expect(typeof items[1].output).toBe('string');
    const images = (items[2].content as Json[]).filter((p) => p.type === 'input_image').map((p) => p.image_url as string);
    expect(images.length).toBe(spans.length);
    // The same bytes the model was shown (the puzzle it read).
    const bytes = (u: string) => Buffer.from(u.slice(u.indexOf(',') + 1), 'base64').toString('hex');
    expect(images.map(bytes)).toEqual(spans.map(bytes));
  }, 240_000);
});
