/**
 * The request fields of NeMo Gym's verify-response row (gym-row.ts): what a dataset row (a `POST /run`
 * body) holds and its verify response repeats, `responses_create_params`, the gold and the routing
 * fields.
 *
 * Request fields of a benchmark row (`benchmarkRequest`), as the reference's BabyVision dataset maps
 * them: `responses_create_params.input` is one user message with the puzzle as an `input_image` data
 * URL and the prompt as `input_text`; `temperature`/`top_p` are those the gateway pinned (the first
 * call's `sampling`) when known; `source_id` is the task id, `category` its type, `l2_category` its
 * subtype, `ans_type` its answer type, `_ng_rollout_index` its repeat.
 */
import type { Row } from '../records/rows.ts';
import type { TranscriptRecord } from '../records/transcript.ts';

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
  /** The row's fields serve does not read (`agent_ref`, `_rowidx`, `_ng_attempt_index`, `instance_config`...), echoed as given. */
  extras?: Record<string, unknown>;
}

/** The `agent_ref` of a row that has none (an exported benchmark row; a request that gave none): the fleet's OpenCode agent. */
export const DEFAULT_AGENT_REF: Readonly<{ name: string }> = { name: 'vcfleet_opencode_agent' };

/** The request's fields a verify response repeats as given, when given (gym-row.ts). */
export const ROUTING_KEYS = ['question', 'source_id', 'category', 'l2_category', 'ans_type', '_ng_task_index', '_ng_rollout_index', '_ng_rollout_id'] as const;

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
