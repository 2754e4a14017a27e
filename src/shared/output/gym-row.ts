/**
 * A rollout as trainers read it: NeMo Gym's verify-response row (what an agent server's `POST /run`
 * answers, and what `vcfleet export --format gym` writes). Pure: the same inputs give the same output
 * (ids are derived, never random; `created_at` is the row's `finished_at`).
 *
 * Exported API (stable: `vcfleet serve` answers `POST /run` with `gymRow`):
 * - `gymRow(input: GymRowInput): GymRow`: the verify-response row of a fleet row, with its optional
 *   transcript record (`response.output`), trajectory (token ids on each call's last item) and the
 *   request's fields (`responses_create_params`, `question`, routing fields), given or derived.
 * - `failureReason(row)`, `finishedNaturally(row)`: the mapping rules below.
 * Its parts, each in its own file: the request fields (`benchmarkRequest`: gym-request-fields.ts),
 * `response.output` (`responseOutput`, `callTokens`: gym-response.ts) and the mask (`maskOf`:
 * training-mask.ts). The flat token record is token-record.ts.
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
 *   reference's narrower `failure_reason` (scoring/rules.ts); this is the wider set the export always had.
 * - `string_match_reward`: the row's (the reference's string-match grade, a diagnostic).
 * - `finished_naturally`, as NeMo Gym's opencode agent computes it: the last policy call of the
 *   transcript ended with finish reason `stop` (not `length`, not tool calls, not a call cut by a
 *   timeout or the call budget: those have another or none). Without a transcript: the session ended
 *   by the model's own last message (stop reason `answered` or `no_answer`).
 * - `turns_used`, as NeMo Gym's opencode agent counts it: the assistant `message` items of
 *   `response.output` (a call that only made tool calls has none; the empty pad is not counted).
 * - `mask_sample`: a trainer must not use the rollout (training-mask.ts): the row is masked or has no
 *   reward, or its token capture says the trajectory cannot be trained on; `mask_reason` is the token
 *   capture's reason (token-capture.ts's reasons), null without one. The same flag is repeated as
 *   `instance_config.mask_sample`, where NeMo RL reads it (over the row's own `instance_config`).
 * - The request's extras (fields of the row serve does not read: `agent_ref`, `_rowidx`,
 *   `_ng_attempt_index`, ...) are echoed as given, as NeMo Gym's collector merges the row into its
 *   result; a field of the row's own (`reward`, `mask_sample`...) is never overwritten by one.
 * - `response.output`: the transcript's calls as output items, with their token ids (gym-response.ts).
 *
 * The fleet's own ids ride along as `run_id` and `rollout_id`, and the row's `weight_version` when it
 * has one (NeMo Gym keeps unknown fields).
 */
import { isMasked, type FailureKind, type Row } from '../records/rows.ts';
import { finishedNaturally as endedByModel } from '../scoring/rules.ts';
import type { TranscriptRecord } from '../records/transcript.ts';
import type { MaskReason, Trajectory } from '../records/trajectory.ts';
import { ROUTING_KEYS, type GymRequestFields, type GymRoutingFields, type ResponsesCreateParams } from './gym-request-fields.ts';
import { EMPTY_MESSAGE_ID, responseOutput, type GymResponse } from './gym-response.ts';
import { maskOf } from './training-mask.ts';

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

/** The last policy call ended with `stop` (the transcript's), or without a transcript the session ended by the model's own last message. */
export function finishedNaturally(row: Pick<Row, 'stop_reason'>, transcript?: Pick<TranscriptRecord, 'turns'> | null): boolean {
  if (transcript && transcript.turns.length > 0) return transcript.turns[transcript.turns.length - 1].finish_reason === 'stop';
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
  /** NeMo RL's place of the mask: the request's `instance_config` with `mask_sample` set to the row's. */
  instance_config: { mask_sample: boolean; [key: string]: unknown };
  /** Why the trajectory cannot be trained on (token capture), or null. */
  mask_reason: MaskReason | null;
  _ng_failure_class?: FailureKind;
  _ng_failure_terminal?: true;
  /** The trainer's weight version the rollout ran with (the row's); absent when none was given. */
  weight_version?: string;
  run_id: string;
  rollout_id: string;
  /** The request's extras, echoed as given (see the header). */
  [extra: string]: unknown;
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
  /** The data URLs of the images the response inlines, by SHA-256 (response-images.ts); none when absent. */
  imageUrls?: ReadonlyMap<string, string>;
}

export function gymRow(input: GymRowInput): GymRow {
  const { row, request } = input;
  const trajectory = input.trajectory ?? null;
  const masked = isMasked(row);
  const mask = maskOf(row, trajectory);
  const output = responseOutput(input.transcript ?? null, trajectory, input.imageUrls);
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
    turns_used: output.filter((i) => i.type === 'message' && i.role === 'assistant' && i.id !== EMPTY_MESSAGE_ID).length,
    finished_naturally: finishedNaturally(row, input.transcript),
    mask_sample: mask.mask_sample,
    instance_config: { ...objectOr(request.extras?.instance_config), mask_sample: mask.mask_sample },
    mask_reason: mask.capture_reason,
    run_id: row.run_id,
    rollout_id: row.rollout_id,
  };
  for (const key of ROUTING_KEYS) if (request[key] !== undefined) (out as unknown as Record<string, unknown>)[key] = request[key];
  if (row.weight_version !== undefined) out.weight_version = row.weight_version;
  if (row.failure_kind !== null) {
    out._ng_failure_class = row.failure_kind;
    if (input.failureTerminal) out._ng_failure_terminal = true;
  }
  // The extras first: a field of the row's own is never overwritten by one.
  return { ...request.extras, ...out };
}

function objectOr(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}
