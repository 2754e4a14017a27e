/**
 * A rollout as trainers read it: NeMo Gym's verify-response row (what an agent server's `POST /run`
 * answers, and what `vcfleet export --format gym` writes) and the flat token record of
 * verl/SkyRL/Atropos-style loaders (`vcfleet export --format tokens`). Pure: the same inputs give the
 * same output (ids are derived, never random; `created_at` is the row's `finished_at`).
 *
 * Exported API (stable: `vcfleet serve` answers `POST /run` with `gymRow`):
 * - `gymRow(input: GymRowInput): GymRow`: the verify-response row of a fleet row, with its optional
 *   transcript record (`response.output`), trajectory (token ids on each call's last item) and the
 *   request's fields (`responses_create_params`, `question`, routing fields), given or derived.
 * - `benchmarkRequest(row, transcript, image, sampling?): GymRequestFields`: the request fields of a
 *   row of the benchmark, as the reference's dataset holds them (see "Request fields" below).
 * - `responseOutput(transcript, trajectory): GymOutputItem[]` and `callTokens(trajectory)`: the parts.
 * - `tokenMask(row, trajectory)`, `tokenRecord(row, trajectory, imagePath): TokenRecordResult`: the
 *   flat record of a trajectory, or why it cannot be made.
 * - `failureReason(row)`, `finishedNaturally(row)`: the mapping rules below.
 *
 * Mapping of the fleet's row (rows.ts) onto the reference's names:
 * - `reward`: 1.0 for the judge's `equivalent`, else 0.0; a masked row (`failure_kind` set) is 0.0
 *   with `mask_sample: true` and `_ng_failure_class` (`judge_failed`, `infra_failed`), so NeMo Gym's
 *   collector routes it to its failures file; it is never a score.
 * - `_ng_failure_terminal`: present (`true`) only when the caller says the failure is terminal (the
 *   collector's convention: absent means a new attempt may succeed). Neither kind is terminal by
 *   itself: a `judge_failed` row keeps the agent's work and can be rejudged (`vcfleet rejudge`), and
 *   an `infra_failed` rollout can succeed once its infrastructure is back.
 * - `failure_reason`: null for reward 1; `incorrect_answer` when judged and not `equivalent`;
 *   `judge_error` when the judge gave no verdict (masked `judge_failed`, or `judge_failure:
 *   refused_input`, scored 0); `infra_error` for `infra_failed`; the stop reason of a rollout that
 *   did not complete (`timeout`, `output_cap`, `context_limit`, `agent_error`; 0 without a judge
 *   call); `no_response` for a finished run that left no text (0 without a judge call; `no_answer`
 *   for a row of the first scoring rules, which did not judge unboxed text). The fleet's row has the
 *   reference's narrower `failure_reason` (scoring.ts); this is the wider set the export always had.
 * - `string_match_reward`: the row's (the reference's string-match grade, a diagnostic).
 * - `finished_naturally`: the session ended by the model's own last message (stop reason `answered`
 *   or `no_answer`), not by a timeout, a cap, the context limit, an agent error or the infrastructure.
 * - `turns_used`: the row's `turns` (answered policy calls of the agent's conversation).
 * - `mask_sample`: the row is masked, or its token capture says the trajectory cannot be trained on
 *   (`mask_reason` then says why: token-capture.ts's reasons); false without token capture otherwise.
 * - `response.output`: per policy call of the transcript, in order: a `reasoning` item (when the
 *   server streamed reasoning), the assistant `message` (its text), a `function_call` per tool call;
 *   then a `function_call_output` per tool result OpenCode sent back (its text; images a tool
 *   returned stay in the transcript, by SHA-256). Failed calls give no item. The call's last item
 *   carries `prompt_token_ids` (the call's whole prompt, rebuilt from the chain), `generation_token_ids`
 *   and `generation_log_probs` when the trajectory has all three for it. Without a transcript each
 *   answered call of the trajectory is an assistant message with no content carrying its tokens;
 *   with neither, one empty assistant message (as the reference pads an empty output). A transcript
 *   cut to fit its bound (its `truncated` says how) gives what it kept: its texts as cut, and no item
 *   for a turn it dropped.
 *
 * Request fields of a benchmark row (`benchmarkRequest`), as the reference's BabyVision dataset maps
 * them: `responses_create_params.input` is one user message with the puzzle as an `input_image` data
 * URL and the prompt as `input_text`; `temperature`/`top_p` are those the gateway pinned (the first
 * call's `sampling`) when known; `source_id` is the task id, `category` its type, `l2_category` its
 * subtype, `ans_type` its answer type, `_ng_rollout_index` its repeat.
 *
 * The fleet's own ids ride along as `run_id` and `rollout_id` (NeMo Gym keeps unknown fields).
 */
import { isMasked, type FailureKind, type Row } from '../rows.ts';
import { finishedNaturally as endedByModel } from '../scoring.ts';
import type { TranscriptRecord, TranscriptTurn } from '../transcript.ts';
import type { MaskReason, Trajectory } from '../trajectory.ts';

// ---------------------------------------------------------------- request fields

export interface InputImagePart {
  type: 'input_image';
  /** A `data:<mime>;base64,...` URL. */
  image_url: string;
  detail: 'auto';
}
export interface InputTextPart {
  type: 'input_text';
  text: string;
}
export interface GymUserMessage {
  role: 'user';
  type: 'message';
  content: Array<InputImagePart | InputTextPart>;
}

/** NeMo Gym's `responses_create_params`: the request as the dataset row holds it (kept as given). */
export interface ResponsesCreateParams {
  input: readonly unknown[] | string;
  temperature?: number;
  top_p?: number;
  max_output_tokens?: number;
  [key: string]: unknown;
}

/** The routing fields of a dataset row, repeated as given by its verify response. */
export interface GymRoutingFields {
  source_id?: string | number;
  category?: string;
  l2_category?: string;
  ans_type?: string;
  _ng_task_index?: number;
  _ng_rollout_index?: number;
  _ng_rollout_id?: string;
}

/** The fields of a dataset row (a `POST /run` body) that its verify response repeats. */
export interface GymRequestFields extends GymRoutingFields {
  responses_create_params: ResponsesCreateParams;
  /** Defaults to the row's `expected_answer`. */
  expected_answer?: string;
  question?: string;
}

const ROUTING_KEYS = ['question', 'source_id', 'category', 'l2_category', 'ans_type', '_ng_task_index', '_ng_rollout_index', '_ng_rollout_id'] as const;

/** The puzzle image of a benchmark row, for its `input_image` data URL. */
export interface RequestImage {
  mime: string;
  /** The image bytes, base64. */
  base64: string;
}

/** The request fields of a benchmark row (see the header): from its transcript's prompt, its puzzle and its task. */
export function benchmarkRequest(row: Row, transcript: Pick<TranscriptRecord, 'task'>, image: RequestImage, sampling: Readonly<Record<string, unknown>> = {}): GymRequestFields {
  const params: ResponsesCreateParams = {
    input: [
      {
        role: 'user',
        type: 'message',
        content: [
          { type: 'input_image', image_url: `data:${image.mime};base64,${image.base64}`, detail: 'auto' },
          { type: 'input_text', text: transcript.task.prompt },
        ],
      } satisfies GymUserMessage,
    ],
  };
  for (const key of ['temperature', 'top_p'] as const) {
    const v = sampling[key];
    if (typeof v === 'number' && Number.isFinite(v)) params[key] = v;
  }
  return {
    responses_create_params: params,
    expected_answer: row.expected_answer,
    question: transcript.task.question,
    source_id: row.task_id,
    category: row.type,
    l2_category: row.subtype,
    ans_type: row.ans_type,
    _ng_rollout_index: row.repeat,
  };
}

// ---------------------------------------------------------------- response

/** NeMo Gym's per-call training fields (`TokenIDLogProbMixin`): all three or none. */
export interface TokenFields {
  prompt_token_ids: number[];
  generation_token_ids: number[];
  generation_log_probs: number[];
}

export interface OutputText {
  type: 'output_text';
  text: string;
  annotations: [];
}
export type GymReasoningItem = { type: 'reasoning'; id: string; summary: Array<{ type: 'summary_text'; text: string }> } & Partial<TokenFields>;
export type GymMessageItem = { type: 'message'; id: string; role: 'assistant'; status: 'completed' | 'incomplete'; content: OutputText[] } & Partial<TokenFields>;
export type GymFunctionCallItem = { type: 'function_call'; id: string; call_id: string; name: string; arguments: string; status: 'completed' } & Partial<TokenFields>;
export interface GymFunctionCallOutputItem {
  type: 'function_call_output';
  call_id: string;
  output: string;
}
export type GymOutputItem = GymReasoningItem | GymMessageItem | GymFunctionCallItem | GymFunctionCallOutputItem;

/** NeMo Gym's `NeMoGymResponse` (the OpenAI Responses object) of one rollout. */
export interface GymResponse {
  id: string;
  object: 'response';
  /** Unix seconds: when the row was made. */
  created_at: number;
  model: string;
  status: 'completed' | 'incomplete';
  incomplete_details: { reason: 'max_output_tokens' } | null;
  error: null;
  output: GymOutputItem[];
  parallel_tool_calls: boolean;
  tool_choice: 'auto';
  tools: [];
  usage: {
    input_tokens: number;
    /** `cache_write_tokens`: newer OpenAI SDKs require it; older ones keep it as an extra field. */
    input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
    output_tokens: number;
    output_tokens_details: { reasoning_tokens: number };
    total_tokens: number;
  };
}

/**
 * Each answered call's token fields, by call index: the generation and its log-probabilities, and the
 * whole prompt, kept for the first call and a call that breaks the chain, otherwise rebuilt as the
 * previous call's prompt + generation + what the environment inserted. A call whose fields are not
 * all known (or whose generation and log-probabilities differ in length) has none.
 */
export function callTokens(trajectory: Pick<Trajectory, 'calls'>): Map<number, TokenFields> {
  const out = new Map<number, TokenFields>();
  let tip: number[] | null = null;
  for (const c of trajectory.calls) {
    if (!c.answered) continue;
    const prompt: number[] | null = c.prompt_token_ids ? c.prompt_token_ids : tip && c.inserted_token_ids ? [...tip, ...c.inserted_token_ids] : null;
    const gen = c.generation_token_ids;
    tip = prompt && gen ? [...prompt, ...gen] : null;
    if (prompt && gen && c.generation_log_probs && c.generation_log_probs.length === gen.length) {
      out.set(c.index, { prompt_token_ids: prompt, generation_token_ids: gen, generation_log_probs: c.generation_log_probs });
    }
  }
  return out;
}

function answeredTurn(t: TranscriptTurn): boolean {
  return t.error === null && t.status !== null && t.status < 400;
}

/** One call's generated items (reasoning, message, function calls), never empty for an answered call. */
function generatedItems(t: TranscriptTurn): Array<GymReasoningItem | GymMessageItem | GymFunctionCallItem> {
  const items: Array<GymReasoningItem | GymMessageItem | GymFunctionCallItem> = [];
  if (t.reasoning) items.push({ type: 'reasoning', id: `rs_${t.index}`, summary: [{ type: 'summary_text', text: t.reasoning }] });
  const status = t.finish_reason === 'length' ? 'incomplete' : 'completed';
  if (t.text || t.tool_calls.length === 0) {
    items.push({ type: 'message', id: `msg_${t.index}`, role: 'assistant', status, content: [{ type: 'output_text', text: t.text, annotations: [] }] });
  }
  t.tool_calls.forEach((c, k) => items.push({ type: 'function_call', id: `fc_${t.index}_${k}`, call_id: c.id, name: c.name, arguments: c.arguments, status: 'completed' }));
  return items;
}

const emptyMessage = (id: string): GymMessageItem => ({ type: 'message', id, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: '', annotations: [] }] });

/** `response.output` (see the header) from the transcript and the trajectory, either of which may be absent. */
export function responseOutput(transcript: Pick<TranscriptRecord, 'turns'> | null, trajectory: Pick<Trajectory, 'calls'> | null): GymOutputItem[] {
  const tokens = trajectory ? callTokens(trajectory) : new Map<number, TokenFields>();
  const out: GymOutputItem[] = [];
  if (transcript) {
    for (const t of transcript.turns) {
      if (!answeredTurn(t)) continue;
      const generated = generatedItems(t);
      const fields = tokens.get(t.index);
      if (fields) Object.assign(generated[generated.length - 1], fields);
      out.push(...generated);
      for (const c of t.tool_calls) if (c.output !== null) out.push({ type: 'function_call_output', call_id: c.id, output: c.output });
    }
  } else if (trajectory) {
    for (const c of trajectory.calls) {
      const fields = tokens.get(c.index);
      if (c.answered) out.push({ type: 'message', id: `msg_${c.index}`, role: 'assistant', status: c.finish_reason === 'length' ? 'incomplete' : 'completed', content: [], ...fields });
    }
  }
  if (!out.some((i) => i.type === 'message')) out.push(emptyMessage('msg_empty'));
  return out;
}

// ---------------------------------------------------------------- the row

export const FAILURE_REASONS = ['incorrect_answer', 'judge_error', 'infra_error', 'no_response', 'no_answer', 'timeout', 'output_cap', 'context_limit', 'agent_error'] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

/** Why the row did not earn reward 1 (see the header), or null when it did. */
export function failureReason(row: Pick<Row, 'reward' | 'failure_kind' | 'judge_failure' | 'judge_verdict' | 'stop_reason' | 'scoring_rules'>): FailureReason | null {
  if (row.failure_kind === 'infra_failed') return 'infra_error';
  if (row.failure_kind === 'judge_failed' || row.judge_failure !== null) return 'judge_error';
  if (row.reward === 1) return null;
  if (row.judge_verdict !== null) return 'incorrect_answer';
  if (row.stop_reason !== null && row.stop_reason !== 'answered' && row.stop_reason !== 'no_answer') return row.stop_reason;
  // A finished run that was not judged: no text (today's rules), or no box (the first rules').
  return row.scoring_rules >= 2 ? 'no_response' : 'no_answer';
}

/** The session ended by the model's own last message. */
export function finishedNaturally(row: Pick<Row, 'stop_reason'>): boolean {
  return endedByModel(row.stop_reason);
}

/** NeMo Gym's verify-response row of one rollout (see the header for each field's rule). */
export interface GymRow extends GymRoutingFields {
  responses_create_params: ResponsesCreateParams;
  response: GymResponse;
  reward: number;
  expected_answer: string;
  question?: string;
  extracted_answer: string | null;
  /** The reference's string-match grade of `extracted_answer` (a diagnostic, never the reward). */
  string_match_reward: number;
  judge_verdict: Row['judge_verdict'];
  judge_reason: string | null;
  failure_reason: FailureReason | null;
  /** The row's `error`: why it is masked or the agent failed, in words (no secrets). */
  failure_detail: string | null;
  turns_used: number;
  finished_naturally: boolean;
  mask_sample: boolean;
  /** Why the trajectory cannot be trained on (token capture), or null. */
  mask_reason: MaskReason | null;
  _ng_failure_class?: FailureKind;
  _ng_failure_terminal?: true;
  run_id: string;
  rollout_id: string;
}

export interface GymRowInput {
  row: Row;
  /** The rollout's transcript record, for `response.output`; null or absent when none was kept. */
  transcript?: Pick<TranscriptRecord, 'turns'> | null;
  /** The rollout's trajectory, for the token fields and the mask; null or absent without token capture. */
  trajectory?: Pick<Trajectory, 'calls' | 'mask_sample' | 'mask_reason'> | null;
  /** The request's fields: those of the `POST /run` body, or `benchmarkRequest(...)` for a benchmark row. */
  request: GymRequestFields;
  /** The masked row's failure is terminal (a new attempt cannot succeed): sets `_ng_failure_terminal`. */
  failureTerminal?: boolean;
}

export function gymRow(input: GymRowInput): GymRow {
  const { row, request } = input;
  const trajectory = input.trajectory ?? null;
  const masked = isMasked(row);
  const tokenMasked = trajectory ? trajectory.mask_sample : (row.token_capture?.mask_sample ?? false);
  const maskReason = trajectory ? trajectory.mask_reason : (row.token_capture?.mask_reason ?? null);
  const output = responseOutput(input.transcript ?? null, trajectory);
  const incomplete = row.stop_reason === 'output_cap';
  const out: GymRow = {
    responses_create_params: request.responses_create_params,
    response: {
      id: `resp_${row.rollout_id}`,
      object: 'response',
      created_at: Math.floor((Date.parse(row.finished_at) || 0) / 1000),
      model: row.policy_model,
      status: incomplete ? 'incomplete' : 'completed',
      incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
      error: null,
      output,
      parallel_tool_calls: true,
      tool_choice: 'auto',
      tools: [],
      usage: {
        input_tokens: row.input_tokens,
        input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
        output_tokens: row.output_tokens,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: row.input_tokens + row.output_tokens,
      },
    },
    reward: row.reward === 1 && !masked ? 1.0 : 0.0,
    expected_answer: request.expected_answer ?? row.expected_answer,
    extracted_answer: row.extracted_answer,
    string_match_reward: row.string_match_reward,
    judge_verdict: row.judge_verdict,
    judge_reason: row.judge_reason,
    failure_reason: failureReason(row),
    failure_detail: row.error,
    turns_used: row.turns,
    finished_naturally: finishedNaturally(row),
    mask_sample: masked || tokenMasked,
    mask_reason: maskReason,
    run_id: row.run_id,
    rollout_id: row.rollout_id,
  };
  for (const key of ROUTING_KEYS) if (request[key] !== undefined) (out as unknown as Record<string, unknown>)[key] = request[key];
  if (row.failure_kind !== null) {
    out._ng_failure_class = row.failure_kind;
    if (input.failureTerminal) out._ng_failure_terminal = true;
  }
  return out;
}

// ---------------------------------------------------------------- the flat token record

/** The flat token record of verl/SkyRL/Atropos-style loaders (trajectory.ts's flat form). */
export interface TokenRecord {
  run_id: string;
  rollout_id: string;
  task_id: string;
  repeat: number;
  weight_version: string | null;
  prompt_ids: number[];
  response_ids: number[];
  /** 1 for generated tokens, 0 for tokens the environment inserted. */
  response_mask: Array<0 | 1>;
  /** 0 where the mask is 0. */
  response_logprobs: number[];
  /** 1 or 0; null for a masked row (kept only on request). */
  reward: number | null;
  /** The image files of the calls in the flat form, in the order the model saw them (paths as `imagePath` gave them). */
  images: string[];
  /** Calls the flat form covers (up to the first break of the chain). */
  flat_calls: number;
  mask_sample: boolean;
  /** Why it cannot be trained on: the row's failure kind, or the trajectory's mask reason; null when it can. */
  mask_reason: FailureKind | MaskReason | 'no_reward' | null;
}

export type TokenRecordResult = { ok: true; record: TokenRecord } | { ok: false; problem: string };

/** Why a trainer must not use the rollout's tokens, or null: the row's failure, a missing reward, the trajectory's mask. */
export function tokenMask(row: Pick<Row, 'failure_kind' | 'reward'>, trajectory: Pick<Trajectory, 'mask_sample' | 'mask_reason'>): TokenRecord['mask_reason'] {
  if (row.failure_kind !== null) return row.failure_kind;
  if (row.reward === null) return 'no_reward';
  if (trajectory.mask_sample) return trajectory.mask_reason ?? 'not_finished';
  return null;
}

/**
 * The flat token record of a row's trajectory. `imagePath` gives the file of an image by SHA-256 (null
 * when there is none); a record whose images are not all on disk, whose trajectory is another
 * rollout's, or whose flat arrays disagree in length is a problem, never a record.
 */
export function tokenRecord(row: Row, t: Trajectory, imagePath: (sha256: string) => string | null): TokenRecordResult {
  if (t.run_id !== row.run_id || t.rollout_id !== row.rollout_id) return { ok: false, problem: `the trajectory is of rollout ${t.rollout_id} of run ${t.run_id}, not this one` };
  const n = t.response_ids.length;
  if (t.response_mask.length !== n || t.response_logprobs.length !== n) {
    return { ok: false, problem: `response_ids, response_mask and response_logprobs differ in length (${n}, ${t.response_mask.length}, ${t.response_logprobs.length})` };
  }
  const images: string[] = [];
  for (const call of t.calls.filter((c) => c.answered).slice(0, t.flat_calls)) {
    for (const sha of call.images) {
      const file = imagePath(sha);
      if (file === null) return { ok: false, problem: `image ${sha} of call ${call.index} has no file in the transcripts' images folder` };
      images.push(file);
    }
  }
  const mask = tokenMask(row, t);
  return {
    ok: true,
    record: {
      run_id: row.run_id, rollout_id: row.rollout_id, task_id: row.task_id, repeat: row.repeat, weight_version: t.weight_version,
      prompt_ids: t.prompt_ids, response_ids: t.response_ids, response_mask: t.response_mask, response_logprobs: t.response_logprobs,
      reward: row.failure_kind === null ? row.reward : null, images, flat_calls: t.flat_calls, mask_sample: mask !== null, mask_reason: mask,
    },
  };
}
