/**
 * A `vcfleet serve` rollout's task, as its request gave it: the task (prompt, question, gold), its
 * images (checked PNG, JPEG or WebP bytes), the request's policy choices, and what the response
 * echoes (its `responses_create_params`, images left out, and routing fields). Kept in Redis gzipped,
 * one record per rollout, for any sandbox-worker, judge-worker and results consumer of the run (the
 * prepared data dir holds no such task). The finished response goes back the same way.
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { z } from 'zod';
import { DataError } from '../errors.ts';
import { PreparedTaskSchema } from './task.ts';
import { SamplingSchema } from '../config/rollout-sections.ts';

/** The image types a request may carry, told apart by their first bytes. */
export const REQUEST_IMAGE_MIMES = ['image/png', 'image/jpeg', 'image/webp'] as const;
export type RequestImageMime = (typeof REQUEST_IMAGE_MIMES)[number];

/** The error of a rollout cancelled by its client (`DELETE /rollouts/{id}`): its row is masked, never scored. */
export const CANCELLED_ERROR = 'cancelled by its client (DELETE /rollouts/{id}): not scored';

const BY_VERSION = 'cancelled with the pending rollouts of weight version ';
/** The error of a rollout cancelled with the stragglers of its weight version (`POST /cancel {"weight_version": …}`). */
export function cancelledByVersionError(weightVersion: string): string {
  return `${BY_VERSION}${JSON.stringify(weightVersion)} (POST /cancel {"weight_version": …}): not scored`;
}

/** Whether a row's error says its rollout was cancelled (by its id or with its weight version). */
export function isCancelledError(error: string | null): boolean {
  return error === CANCELLED_ERROR || (error !== null && error.startsWith(BY_VERSION));
}

/** The largest gzipped record kept per rollout (a request or a response), in bytes; an inflated one past it is refused. */
export const MAX_RECORD_BYTES = 512 * 1024 * 1024;

/** The image type of `bytes` by their magic numbers; null when they are no PNG, JPEG or WebP. */
export function requestImageMime(bytes: Uint8Array): RequestImageMime | null {
  const at = (i: number, magic: readonly number[]) => bytes.length >= i + magic.length && magic.every((b, k) => bytes[i + k] === b);
  if (at(0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (at(0, [0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (at(0, [0x52, 0x49, 0x46, 0x46]) && at(8, [0x57, 0x45, 0x42, 0x50])) return 'image/webp';
  return null;
}

const RequestImageSchema = z.object({
  mime: z.enum(REQUEST_IMAGE_MIMES),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** The bytes, base64. */
  data: z.string(),
});

export const RequestTaskSchema = z.object({
  v: z.literal(1),
  /** The client's id of the rollout (`_ng_rollout_id`, or the one serve made). */
  ng_rollout_id: z.string(),
  /** SHA-256 of the request as it was accepted: the same id asked again with another row is refused. */
  fingerprint: z.string(),
  accepted_at: z.string(),
  /** The task: the first image's hash and type; `prompt` is the request's input_text. */
  task: PreparedTaskSchema,
  /** Every image, in the order the request gave them (the first is the task's). */
  images: z.array(RequestImageSchema).min(1),
  policy: z.object({
    /** The model to ask for (`policy.model`); null: the run's. */
    model: z.string().nullable(),
    weight_version: z.string().nullable(),
    /** The endpoint asked for (`policy.base_url`, credentials removed); null: the run's. */
    base_url: z.string().nullable(),
    /** Sampling pinned on every call over the run's (`temperature`, `top_p` of the request). */
    sampling: SamplingSchema,
    /** The output cap per call (`max_output_tokens`); null: the run's. */
    max_output_tokens: z.number().int().positive().nullable(),
  }),
  /** What the response echoes: `responses_create_params` with each image's URL as `image:<index>`, and the routing fields given. */
  echo: z.object({ responses_create_params: z.record(z.string(), z.unknown()), routing: z.record(z.string(), z.unknown()) }),
  /** How long the finished response waits for its client (serve.response_ttl_s), and once fetched (serve.fetched_ttl_s). */
  response_ttl_s: z.number().int().positive(),
  fetched_ttl_s: z.number().int().positive(),
});
export type RequestTask = z.infer<typeof RequestTaskSchema>;

/** The response of a finished rollout, as the results consumer leaves it for serve. */
export const RequestResponseSchema = z.object({
  v: z.literal(1),
  rollout_id: z.string(),
  ng_rollout_id: z.string(),
  /** The verify-response row, as the client gets it. */
  response: z.record(z.string(), z.unknown()),
  finished_at: z.string(),
});
export type RequestResponse = z.infer<typeof RequestResponseSchema>;

/** JSON, gzipped. */
export function encodeRecord(value: unknown): Buffer {
  return gzipSync(Buffer.from(JSON.stringify(value)), { level: 1 });
}

function decode<T>(what: string, schema: z.ZodType<T>, bytes: Buffer): T {
  let json: unknown;
  try {
    json = JSON.parse(gunzipSync(bytes, { maxOutputLength: MAX_RECORD_BYTES }).toString('utf8'));
  } catch (err) {
    throw new DataError(`the ${what} record in Redis cannot be read: ${(err as Error).message}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new DataError(`the ${what} record in Redis is malformed: ${parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

export function decodeRequestTask(bytes: Buffer): RequestTask {
  return decode('request task', RequestTaskSchema, bytes);
}

export function decodeRequestResponse(bytes: Buffer): RequestResponse {
  return decode('response', RequestResponseSchema, bytes);
}

/** The images of a request task as the agent attaches them. */
export function requestImages(record: RequestTask): Array<{ bytes: Buffer; mime: RequestImageMime; sha256: string }> {
  return record.images.map((i) => ({ bytes: Buffer.from(i.data, 'base64'), mime: i.mime, sha256: i.sha256 }));
}

/** `responses_create_params` as the request gave it: each image's data URL put back in its place. */
export function echoedParams(record: RequestTask): Record<string, unknown> {
  const urls = record.images.map((i) => `data:${i.mime};base64,${i.data}`);
  const restore = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(restore);
    if (value && typeof value === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = k === 'image_url' && typeof v === 'string' && /^image:\d+$/.test(v) ? (urls[Number(v.slice(6))] ?? v) : restore(v);
      return out;
    }
    return value;
  };
  return restore(record.echo.responses_create_params) as Record<string, unknown>;
}
