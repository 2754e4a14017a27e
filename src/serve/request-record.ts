/**
 * What serve keeps of an accepted request: its rollout id (derived from `_ng_rollout_id`, so the same
 * id is the same rollout), and its task record (request-task.ts): the task every stage reads, its
 * images, its policy choices, and what the response repeats. Pure.
 */
import { createHash } from 'node:crypto';
import type { RequestTask } from '../shared/records/request-task.ts';
import type { ParsedRun } from './gym-request.ts';

/**
 * The fleet's rollout id of a client's rollout id: `<runId>-ng-<id>`, the id kept as it is when it is
 * made of letters, digits, `_`, `-` and `.` (BullMQ job ids may not hold `:`) and is short; otherwise
 * its safe characters and a hash of it, so two ids never meet.
 */
export function serveRolloutId(runId: string, ngRolloutId: string): string {
  const safe = ngRolloutId.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 80);
  const key = safe === ngRolloutId ? safe : `${safe}-${createHash('sha256').update(ngRolloutId).digest('hex').slice(0, 16)}`;
  return `${runId}-ng-${key}`;
}

export interface RecordContext {
  benchmark: string;
  /** The client's rollout id, given or made by serve. */
  ngRolloutId: string;
  responseTtlS: number;
  fetchedTtlS: number;
}

/** `responses_create_params` as kept: each image's data URL as `image:<index>` (the bytes are kept once, in `images`). */
function paramsWithoutImages(parsed: ParsedRun): Record<string, unknown> {
  const params = structuredClone(parsed.body.responses_create_params) as Record<string, unknown> & { input: Array<{ content: Array<Record<string, unknown>> }> };
  let n = 0;
  for (const part of params.input[0].content) if (part.type === 'input_image') part.image_url = `image:${n++}`;
  return params;
}

export function requestRecord(parsed: ParsedRun, ctx: RecordContext): RequestTask {
  const { body, images } = parsed;
  const params = body.responses_create_params;
  const taskId = body.source_id !== undefined ? String(body.source_id) : body._ng_task_index !== undefined ? `task-${body._ng_task_index}` : `request-${ctx.ngRolloutId}`;
  // The row's extras first: the fields serve reads are written over them (they never share a name).
  const routing: Record<string, unknown> = { ...parsed.extras, expected_answer: body.expected_answer, question: body.question };
  for (const key of ['source_id', 'category', 'l2_category', 'ans_type', '_ng_task_index', '_ng_rollout_index'] as const) if (body[key] !== undefined) routing[key] = body[key];
  routing._ng_rollout_id = body._ng_rollout_id ?? ctx.ngRolloutId;
  const sampling: Record<string, number> = {};
  if (params.temperature !== undefined) sampling.temperature = params.temperature;
  if (params.top_p !== undefined) sampling.top_p = params.top_p;
  return {
    v: 1,
    ng_rollout_id: ctx.ngRolloutId,
    fingerprint: parsed.fingerprint,
    accepted_at: new Date().toISOString(),
    task: {
      task_id: taskId.slice(0, 256),
      benchmark: ctx.benchmark,
      prompt: parsed.prompt,
      question: body.question,
      gold: String(body.expected_answer),
      type: body.category ?? 'unspecified',
      subtype: body.l2_category ?? 'unspecified',
      ans_type: parsed.ansType,
      options: [],
      image_sha256: images[0].sha256,
      image_mime: images[0].mime,
      image_file: '',
    },
    images: images.map((i) => ({ mime: i.mime, sha256: i.sha256, data: i.bytes.toString('base64') })),
    policy: {
      model: body.policy?.model ?? null,
      weight_version: body.policy?.weight_version ?? null,
      base_url: parsed.baseUrl,
      sampling,
      max_output_tokens: params.max_output_tokens ?? null,
    },
    echo: { responses_create_params: paramsWithoutImages(parsed), routing },
    response_ttl_s: ctx.responseTtlS,
    fetched_ttl_s: ctx.fetchedTtlS,
  };
}
