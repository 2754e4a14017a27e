/**
 * The trainer-facing builders (shared/output/gym-row.ts) on fixture records: the verify-response row
 * (output items in order, token fields on each call's last item with the prompt rebuilt from the
 * chain, the mapping of stop reasons and failures, masked rows' failure class), the request fields of
 * a benchmark row, and the flat token record (images by path, masks, problems).
 */
import { describe, expect, it } from 'vitest';
import { benchmarkRequest, type GymRequestFields } from '../../../src/shared/output/gym-request-fields.ts';
import { callTokens, responseOutput } from '../../../src/shared/output/gym-response.ts';
import { failureReason, gymRow } from '../../../src/shared/output/gym-row.ts';
import { stepRecords } from '../../../src/shared/output/step-records.ts';
import { tokenRecord } from '../../../src/shared/output/token-record.ts';
import { buildRow, RowSchema, type Grading, type Row } from '../../../src/shared/records/rows.ts';
import { rolloutOutcome, type RolloutOutcomeInput } from '../../../src/shared/records/rollout-outcome.ts';
import type { TranscriptRecord } from '../../../src/shared/records/transcript.ts';
import { TRAJECTORY_VERSION, type Trajectory } from '../../../src/shared/records/trajectory.ts';

const PUZZLE = 'a'.repeat(64);
const CROP = 'b'.repeat(64);

function row(outcome: RolloutOutcomeInput | null, grading: Grading, extra: Partial<Row> = {}): Row {
  const r = buildRow(
    { runId: 'r1', benchmark: 'babyvision_opencode', policyModel: 'pol', judgeModel: 'judge', rolloutId: 'r1-t7-0', repeat: 0,
      task: { task_id: 't7', type: 'Visual Tracking', subtype: 'Maze', ans_type: 'choice', gold: 'B' } },
    outcome === null ? null : rolloutOutcome(outcome), grading,
  );
  return { ...r, finished_at: '2026-01-02T03:04:05.000Z', ...extra };
}

const answered = (): Row => row({ stop_reason: 'answered', extracted_answer: 'B', turns: 2, tool_calls: 1, input_tokens: 300, output_tokens: 40 }, { kind: 'scored', verdict: 'equivalent', reason: 'same letter', reward: 1 });

const turn = (index: number, over: Partial<TranscriptRecord['turns'][number]>): TranscriptRecord['turns'][number] => ({
  index, started_at: '2026-01-02T03:00:00Z', latency_ms: 5, status: 200, error: null, finish_reason: 'stop', input_tokens: 10, output_tokens: 3,
  shown_images: [], text: '', reasoning: null, tool_calls: [], ...over,
});

function transcript(): Pick<TranscriptRecord, 'turns' | 'task'> {
  return {
    task: { prompt: 'Look, then answer in \\boxed{}.\n---\nWhich path?', question: 'Which path?\n(A) left\n(B) right', gold: 'B', ans_type: 'choice', type: 'Visual Tracking', subtype: 'Maze', options: ['left', 'right'], image_sha256: PUZZLE },
    turns: [
      turn(0, { text: 'I crop the maze.', reasoning: 'think', shown_images: [PUZZLE], tool_calls: [{ id: 'call_1', name: 'bash', arguments: '{"command":"python3 crop.py"}', output: 'saved crop.png', images: [] }] }),
      turn(1, { status: 503, error: 'HTTP 503', text: '' }),
      turn(2, { text: 'The path is \\boxed{B}.' }),
    ],
  };
}

const tcall = (index: number, over: Partial<Trajectory['calls'][number]>): Trajectory['calls'][number] => ({
  index, started_at: '2026-01-02T03:00:00Z', latency_ms: 5, status: 200, finish_reason: 'stop', answered: true, prompt_token_count: null,
  generation_token_ids: null, generation_log_probs: null, missing: [], sampling: { temperature: 0.7, top_p: 0.95 }, weight_version: 'w1', images: [], ...over,
});

function trajectory(over: Partial<Trajectory> = {}): Trajectory {
  return {
    trajectory_version: TRAJECTORY_VERSION, run_id: 'r1', rollout_id: 'r1-t7-0', task_id: 't7', repeat: 0, attempt: 1, policy_model: 'pol', weight_version: 'w1',
    stop_reason: 'answered', reward: 1, mask_sample: false, mask_reason: null, mask_detail: null, chain: { contiguous: true, breaks: [] },
    calls: [
      tcall(0, { prompt_token_ids: [1, 2, 3], generation_token_ids: [10, 11], generation_log_probs: [-0.5, -0.25], images: [PUZZLE] }),
      tcall(1, { status: 503, answered: false, missing: ['prompt_token_ids', 'token_ids', 'logprobs'] }),
      tcall(2, { inserted_token_ids: [4, 5], generation_token_ids: [12], generation_log_probs: [-1], images: [CROP] }),
    ],
    other_calls: [], other_calls_dropped: 0, turns: [], images: [PUZZLE, CROP], image_mimes: { [PUZZLE]: 'image/png', [CROP]: 'image/png' },
    flat_calls: 2, prompt_ids: [1, 2, 3], response_ids: [10, 11, 4, 5, 12], response_mask: [1, 1, 0, 0, 1], response_logprobs: [-0.5, -0.25, 0, 0, -1], truncated: [],
    ...over,
  };
}

const REQUEST: GymRequestFields = { responses_create_params: { input: [{ role: 'user', content: 'q' }] }, question: 'q', source_id: 42, category: 'c', _ng_task_index: 3, _ng_rollout_index: 1, _ng_rollout_id: 'ng-3-1' };

describe('gymRow', () => {
  it('puts reasoning, message, function calls and their outputs in order, with each call\'s tokens on its last item', () => {
    const g = gymRow({ row: answered(), transcript: transcript(), trajectory: trajectory(), request: REQUEST });
    expect(g.response.output.map((i) => `${i.type}${'id' in i && i.id ? `:${i.id}` : ''}`)).toEqual(['reasoning:rs_0', 'message:msg_0', 'function_call:fc_0_0', 'function_call_output', 'message:msg_2']);
    const [reasoning, message, call, output, last] = g.response.output;
    expect(reasoning).toMatchObject({ summary: [{ type: 'summary_text', text: 'think' }] });
    expect(reasoning).not.toHaveProperty('prompt_token_ids');
    expect(message).toMatchObject({ role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'I crop the maze.', annotations: [] }] });
    expect(message).not.toHaveProperty('generation_token_ids');
    expect(call).toMatchObject({ call_id: 'call_1', name: 'bash', arguments: '{"command":"python3 crop.py"}', prompt_token_ids: [1, 2, 3], generation_token_ids: [10, 11], generation_log_probs: [-0.5, -0.25] });
    expect(output).toEqual({ type: 'function_call_output', call_id: 'call_1', output: 'saved crop.png' });
    // call 2's prompt: call 0's prompt + generation + what the environment inserted
    expect(last).toMatchObject({ prompt_token_ids: [1, 2, 3, 10, 11, 4, 5], generation_token_ids: [12], generation_log_probs: [-1] });
  });

  it('maps a correct row onto the reference\'s fields, with the routing fields it was given', () => {
    const g = gymRow({ row: answered(), transcript: transcript(), trajectory: trajectory(), request: REQUEST });
    expect(g).toMatchObject({
      responses_create_params: REQUEST.responses_create_params, reward: 1, expected_answer: 'B', question: 'q', extracted_answer: 'B',
      judge_verdict: 'equivalent', judge_reason: 'same letter', failure_reason: null, turns_used: 2, finished_naturally: true,
      source_id: 42, category: 'c', _ng_task_index: 3, _ng_rollout_index: 1, _ng_rollout_id: 'ng-3-1', mask_sample: false, mask_reason: null, run_id: 'r1', rollout_id: 'r1-t7-0',
    });
    expect(g).not.toHaveProperty('_ng_failure_class');
    expect(g).not.toHaveProperty('l2_category');
    expect(g.response).toMatchObject({ id: 'resp_r1-t7-0', object: 'response', model: 'pol', status: 'completed', created_at: Date.parse('2026-01-02T03:04:05Z') / 1000, tools: [], tool_choice: 'auto' });
    expect(g.response.usage).toEqual({ input_tokens: 300, input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }, output_tokens: 40, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 340 });
    expect(JSON.parse(JSON.stringify(g))).toEqual(g); // plain JSON, nothing undefined left behind
  });

  it('masks a judge_failed row with its failure class, terminal only when said so', () => {
    const r = row({ stop_reason: 'answered', extracted_answer: 'B', turns: 1 }, { kind: 'masked', failure: 'judge_failed', error: 'the judge is unavailable', judgeFailure: 'unavailable' });
    const g = gymRow({ row: r, request: REQUEST });
    expect(g).toMatchObject({ reward: 0, mask_sample: true, _ng_failure_class: 'judge_failed', failure_reason: 'judge_error', failure_detail: 'the judge is unavailable', finished_naturally: true });
    expect(g).not.toHaveProperty('_ng_failure_terminal');
    expect(gymRow({ row: r, request: REQUEST, failureTerminal: true })._ng_failure_terminal).toBe(true);
  });

  it("puts the images a tool result brought into the next prompt after its text, as a user message of input_image data URLs (where NeMo RL bins them); names one not kept; an image shown later is such a message before that call", () => {
    const t = transcript();
    t.turns[0].tool_calls[0] = { id: 'call_1', name: 'read', arguments: '{"filePath":"crop.png"}', output: 'Image read successfully', images: [CROP, PUZZLE] };
    t.turns[2].shown_images = [CROP];
    const urls = new Map([[CROP, 'data:image/png;base64,Q1JPUA==']]);
    const g = gymRow({ row: answered(), transcript: t, trajectory: trajectory(), request: REQUEST, imageUrls: urls });
    const out = g.response.output as Array<Record<string, any>>;
    const k = out.findIndex((i) => i.type === 'function_call_output');
    expect(out[k].output).toBe(`Image read successfully\n[1 image(s) not kept (over the rollout's image budget): ${PUZZLE}]`);
    const image = { type: 'input_image', image_url: 'data:image/png;base64,Q1JPUA==', detail: 'auto' };
    expect(out[k + 1]).toEqual({ type: 'message', role: 'user', status: 'completed', content: [image] });
    // The later call's own image: a user message right before that call's items, after the tool result's.
    const users = out.filter((i) => i.type === 'message' && i.role === 'user');
    expect(users).toHaveLength(2);
    expect(out.indexOf(users[1])).toBeGreaterThan(k + 1);
    expect(out[out.indexOf(users[1]) + 1].role ?? out[out.indexOf(users[1]) + 1].type).not.toBe('user');
    // Image messages are not turns of the model's.
    expect(g.turns_used).toBe(gymRow({ row: answered(), transcript: transcript(), request: REQUEST }).turns_used);
    // Without images a tool result is its text, as before.
    expect(gymRow({ row: answered(), transcript: transcript(), request: REQUEST }).response.output.find((i) => i.type === 'function_call_output')!.output).toBe('saved crop.png');
  });

  it("counts turns_used as assistant messages and finished_naturally by the last call's finish reason, as NeMo Gym's opencode agent does; puts the mask in instance_config too", () => {
    const t = transcript();
    const g = gymRow({ row: answered(), transcript: t, request: { ...REQUEST, extras: { instance_config: { seed: 1 }, agent_ref: { name: 'x' }, reward: 7 } } });
    expect(g).toMatchObject({ turns_used: 2, finished_naturally: true, instance_config: { seed: 1, mask_sample: false }, agent_ref: { name: 'x' }, reward: 1 });
    t.turns[2] = { ...t.turns[2], text: '', tool_calls: [{ id: 'call_2', name: 'bash', arguments: '{}', output: null, images: [] }], finish_reason: 'tool_calls' };
    expect(gymRow({ row: answered(), transcript: t, request: REQUEST })).toMatchObject({ turns_used: 1, finished_naturally: false });
    t.turns.push(turn(3, { status: null, error: 'timeout', finish_reason: null }));
    expect(gymRow({ row: answered(), transcript: t, request: REQUEST }).finished_naturally).toBe(false);
  });

  it('masks an infra_failed row; without a transcript or trajectory the output is one empty assistant message', () => {
    const g = gymRow({ row: row(null, { kind: 'masked', failure: 'infra_failed', error: 'the sandbox could not be created' }), request: REQUEST });
    expect(g).toMatchObject({ reward: 0, mask_sample: true, _ng_failure_class: 'infra_failed', failure_reason: 'infra_error', finished_naturally: false, turns_used: 0 });
    expect(g.response.output).toEqual([{ type: 'message', id: 'msg_empty', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: '', annotations: [] }] }]);
  });

  it('says why a row earned 0: the stop reason, a wrong answer, or a judge that refused the input', () => {
    const timeout = row({ stop_reason: 'timeout', turns: 3 }, { kind: 'unanswered' });
    expect(gymRow({ row: timeout, request: REQUEST })).toMatchObject({ reward: 0, failure_reason: 'timeout', finished_naturally: false, mask_sample: false });
    // A finished run not judged left no text (today's rules); under the first rules it had no box.
    expect(failureReason(row({ stop_reason: 'no_answer' }, { kind: 'unanswered' }))).toBe('no_response');
    expect(failureReason({ ...row({ stop_reason: 'no_answer' }, { kind: 'unanswered' }), scoring_rules: 1 })).toBe('no_answer');
    expect(failureReason(row({ stop_reason: 'answered', extracted_answer: 'A' }, { kind: 'scored', verdict: 'different', reason: 'no', reward: 0 }))).toBe('incorrect_answer');
    expect(failureReason(row({ stop_reason: 'answered', extracted_answer: 'A' }, { kind: 'refused', error: 'context length' }))).toBe('judge_error');
    const capped = gymRow({ row: row({ stop_reason: 'output_cap' }, { kind: 'unanswered' }), request: REQUEST });
    expect(capped.response).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
  });

  it('takes the mask from the trajectory, and from the row\'s token capture when the trajectory is not at hand', () => {
    const ignored = trajectory({ mask_sample: true, mask_reason: 'server_ignored_token_fields' });
    expect(gymRow({ row: answered(), trajectory: ignored, request: REQUEST })).toMatchObject({ mask_sample: true, mask_reason: 'server_ignored_token_fields', reward: 1 });
    const summary = { ...answered(), token_capture: { calls: 2, contiguous: true, mask_sample: true, mask_reason: 'images_over_budget' as const } };
    expect(gymRow({ row: summary, request: REQUEST })).toMatchObject({ mask_sample: true, mask_reason: 'images_over_budget' });
    // An old record masked for what the model caused (a broken chain, the output cap) is trainable.
    expect(gymRow({ row: answered(), trajectory: trajectory({ mask_sample: true, mask_reason: 'chain_broken' }), request: REQUEST })).toMatchObject({ mask_sample: false, mask_reason: null, reward: 1 });
  });

  it('without a transcript, gives each answered call of the trajectory as a content-less message carrying its tokens', () => {
    expect(responseOutput(null, trajectory())).toEqual([
      { type: 'message', id: 'msg_0', role: 'assistant', status: 'completed', content: [], prompt_token_ids: [1, 2, 3], generation_token_ids: [10, 11], generation_log_probs: [-0.5, -0.25] },
      { type: 'message', id: 'msg_2', role: 'assistant', status: 'completed', content: [], prompt_token_ids: [1, 2, 3, 10, 11, 4, 5], generation_token_ids: [12], generation_log_probs: [-1] },
    ]);
  });
});

describe('callTokens', () => {
  it('gives no fields to a call whose prompt cannot be rebuilt or whose log-probabilities do not match, and restarts at a full prompt', () => {
    const t = trajectory({
      calls: [
        tcall(0, { prompt_token_ids: [1], generation_token_ids: [2, 3], generation_log_probs: [-1] }), // one log-prob short
        tcall(1, { inserted_token_ids: [4], generation_token_ids: [5], generation_log_probs: [-1] }),
        tcall(2, { inserted_token_ids: [6], generation_token_ids: null, generation_log_probs: null }), // no generation: the next cannot chain
        tcall(3, { inserted_token_ids: [7], generation_token_ids: [8], generation_log_probs: [-2] }),
        tcall(4, { prompt_token_ids: [9, 9], generation_token_ids: [10], generation_log_probs: [-3] }), // a break keeps its whole prompt
      ],
    });
    const tokens = callTokens(t);
    expect([...tokens.keys()]).toEqual([1, 4]);
    expect(tokens.get(1)!.prompt_token_ids).toEqual([1, 2, 3, 4]);
    expect(tokens.get(4)!.prompt_token_ids).toEqual([9, 9]);
  });
});

describe('benchmarkRequest', () => {
  it('makes the reference\'s dataset row of a benchmark task: the puzzle as a data URL, the prompt, the task as routing fields', () => {
    const req = benchmarkRequest(answered(), transcript(), { mime: 'image/png', base64: 'iVBORw0K' }, { temperature: 0.7, top_p: 0.95, top_k: 20 });
    expect(req).toEqual({
      responses_create_params: {
        input: [{ role: 'user', type: 'message', content: [{ type: 'input_image', image_url: 'data:image/png;base64,iVBORw0K', detail: 'auto' }, { type: 'input_text', text: 'Look, then answer in \\boxed{}.\n---\nWhich path?' }] }],
        temperature: 0.7, top_p: 0.95,
      },
      expected_answer: 'B', question: 'Which path?\n(A) left\n(B) right', source_id: 't7', category: 'Visual Tracking', l2_category: 'Maze', ans_type: 'choice', _ng_rollout_index: 0,
    });
    expect(gymRow({ row: answered(), request: req })).toMatchObject({ source_id: 't7', l2_category: 'Maze', ans_type: 'choice', _ng_rollout_index: 0 });
  });
});

describe('tokenRecord', () => {
  const paths = (sha: string) => `/imgs/${sha.slice(0, 1)}.png`;

  it('gives the flat form with the images of its calls by path', () => {
    const res = tokenRecord(answered(), trajectory(), paths);
    expect(res).toEqual({
      ok: true,
      record: {
        run_id: 'r1', rollout_id: 'r1-t7-0', task_id: 't7', repeat: 0, weight_version: 'w1', prompt_ids: [1, 2, 3], response_ids: [10, 11, 4, 5, 12],
        response_mask: [1, 1, 0, 0, 1], response_logprobs: [-0.5, -0.25, 0, 0, -1], reward: 1, images: ['/imgs/a.png', '/imgs/b.png'], flat_calls: 2, contiguous: true, truncated: false, mask_sample: false, mask_reason: null,
      },
    });
  });

  it('keeps only the images of the calls the flat form covers', () => {
    const broken = { contiguous: false, breaks: [{ call: 2, token: 4, why: 'differs' }] };
    const res = tokenRecord(answered(), trajectory({ flat_calls: 1, chain: broken }), paths);
    expect(res.ok && res.record).toMatchObject({ images: ['/imgs/a.png'], contiguous: false, mask_sample: false, mask_reason: null });
  });

  it('a chain that broke loses nothing as steps: each answered call with its whole prompt as the server saw it', () => {
    const broken = { contiguous: false, breaks: [{ call: 2, token: 4, why: 'differs' }] };
    const t = trajectory({ flat_calls: 1, chain: broken });
    t.calls[2] = { ...t.calls[2], inserted_token_ids: undefined, prompt_token_ids: [1, 2, 3, 10, 99, 4, 5] };
    const res = stepRecords(answered(), t, paths);
    expect(res.ok && res.records.map((r) => [r.call, r.step, r.prompt_token_ids, r.generation_token_ids, r.generation_log_probs, r.extends_previous, r.images])).toEqual([
      [0, 0, [1, 2, 3], [10, 11], [-0.5, -0.25], true, ['/imgs/a.png']],
      [2, 1, [1, 2, 3, 10, 99, 4, 5], [12], [-1], false, ['/imgs/a.png', '/imgs/b.png']],
    ]);
    expect(res.ok && res.records[0]).toMatchObject({ reward: 1, steps: 2, mask_sample: false, weight_version: 'w1' });
    // Chained, a call's prompt is rebuilt from the previous prompt + generation + the inserted ids.
    const chained = stepRecords(answered(), trajectory(), paths);
    expect(chained.ok && chained.records[1].prompt_token_ids).toEqual([1, 2, 3, 10, 11, 4, 5]);
    // Past the capture's bound the steps stop where the ids stop.
    const cut = trajectory({ truncated: ['token ids past the per-rollout bound were not kept'] });
    cut.calls[2] = { ...cut.calls[2], inserted_token_ids: undefined, generation_token_ids: null };
    expect(stepRecords(answered(), cut, paths)).toMatchObject({ ok: true, truncated: true, records: [{ call: 0 }] });
    expect(stepRecords(answered(), trajectory(), () => null)).toMatchObject({ ok: false, missingImage: true });
  });

  it('marks a masked row, and refuses another rollout\'s trajectory, unequal arrays and a missing image', () => {
    const masked = row({ stop_reason: 'answered', extracted_answer: 'B' }, { kind: 'masked', failure: 'judge_failed', error: 'x' });
    const res = tokenRecord(masked, trajectory(), paths);
    expect(res.ok && res.record).toMatchObject({ reward: null, mask_sample: true, mask_reason: 'judge_failed' });
    expect(tokenRecord({ ...answered(), rollout_id: 'other' }, trajectory(), paths)).toEqual({ ok: false, problem: 'the trajectory is of rollout r1-t7-0 of run r1, not this one' });
    expect(tokenRecord(answered(), trajectory({ response_mask: [1] }), paths)).toMatchObject({ ok: false, problem: expect.stringMatching(/differ in length/) });
    expect(tokenRecord(answered(), trajectory(), (sha) => (sha === CROP ? null : paths(sha)))).toEqual({ ok: false, problem: `image ${CROP} of call 2 has no file in the transcripts' images folder`, missingImage: true });
  });
});

describe('weight_version on rows and gym rows', () => {
  it("a row made with the request's weight version carries it to its gym row; an old row without one still parses, and its gym row has none", () => {
    const ctx = { runId: 'r1', benchmark: 'babyvision_opencode', policyModel: 'pol', judgeModel: 'judge', rolloutId: 'r1-t7-0', repeat: 0, task: { task_id: 't7', type: 'T', subtype: 'S', ans_type: 'choice' as const, gold: 'B' } };
    const grading: Grading = { kind: 'scored', verdict: 'equivalent', reason: 'same', reward: 1 };
    const withVersion = buildRow({ ...ctx, weightVersion: 'step-12' }, rolloutOutcome({ stop_reason: 'answered', extracted_answer: 'B' }), grading);
    expect(withVersion.weight_version).toBe('step-12');
    const request = benchmarkRequest(withVersion, transcript(), { mime: 'image/png', base64: 'eA==' });
    expect(gymRow({ row: withVersion, request }).weight_version).toBe('step-12');
    const old = RowSchema.parse(JSON.parse(JSON.stringify({ ...answered(), weight_version: undefined })));
    expect('weight_version' in old).toBe(false);
    expect('weight_version' in gymRow({ row: old, request })).toBe(false);
    expect('weight_version' in buildRow({ ...ctx, weightVersion: null }, null, { kind: 'unanswered' })).toBe(false);
  });
});
