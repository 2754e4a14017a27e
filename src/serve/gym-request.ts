/**
 * A `POST /run` body: one row of the reference's dataset (`responses_create_params` with one user
 * message of `input_image` data URLs and an `input_text`, the gold `expected_answer`, the `question`,
 * the optional routing fields) and the optional `policy`. Everything an HTTP client sends is attacker
 * input: every field we read is typed, every image is decoded, checked by its first bytes (PNG, JPEG
 * or WebP) and bounded, and a refusal names the field (400) or the bound (413).
 *
 * The row itself is open, as NeMo Gym's request model is: the fields its collector and NeMo RL add
 * (`agent_ref`, `_ng_attempt_index`, `_rowidx`, any other `_ng_*` or routing field) are kept and
 * echoed on the response (`extras`); those we know are typed. Inside `responses_create_params` (and
 * its message, its parts, `policy`) every field is known: an unknown one there is refused.
 * Pure: nothing here touches Redis.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { stripCredentials } from '../shared/config/run-settings.ts';
import { requestImageMime, type RequestImageMime } from '../shared/records/request-task.ts';
import type { AnsTypeSchema } from '../shared/records/task.ts';

/** A refusal of a request: its HTTP status and what is wrong (and what to do). */
export class RequestRefused extends Error {
  override name = 'RequestRefused';
  /** `retryAfterS`: when to ask again (429: the run is at its bound), sent as `Retry-After`. */
  constructor(readonly status: 400 | 404 | 409 | 410 | 413 | 429, message: string, readonly retryAfterS?: number) {
    super(message);
  }
}

const InputImage = z.object({ type: z.literal('input_image'), image_url: z.string(), detail: z.enum(['auto', 'low', 'high']).optional() }).strict();
const InputText = z.object({ type: z.literal('input_text'), text: z.string().min(1, 'the input_text part is empty') }).strict();
const UserMessage = z
  .object({
    role: z.literal('user'),
    type: z.literal('message').optional(),
    content: z.array(z.discriminatedUnion('type', [InputImage, InputText])).min(1).max(64),
  })
  .strict();

const ParamsSchema = z
  .object({
    input: z.array(UserMessage).length(1, 'input must be one user message (its input_image parts and an input_text part)'),
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().gt(0).max(1).optional(),
    max_output_tokens: z.number().int().positive().max(10_000_000).optional(),
    /** OpenAI's request metadata (NeMo Gym sets it, e.g. for `num_repeats_add_seed`): echoed, never read. */
    metadata: z.record(z.string().max(64), z.string().max(512)).refine((m) => Object.keys(m).length <= 16, 'metadata holds at most 16 keys').optional(),
  })
  .strict();

const PolicySchema = z
  .object({
    model: z.string().min(1).max(256).optional(),
    weight_version: z.string().min(1).max(256).optional(),
    base_url: z.string().url().max(2048).optional(),
  })
  .strict();

const Label = z.string().min(1).max(256);

export const RunBodySchema = z
  .object({
    responses_create_params: ParamsSchema,
    expected_answer: z.union([z.string().min(1, 'expected_answer is empty').max(10_000), z.number()]),
    question: z.string().min(1, 'question is empty').max(200_000),
    source_id: z.union([Label, z.number()]).optional(),
    category: Label.optional(),
    l2_category: Label.optional(),
    ans_type: z.enum(['choice', 'blank']).optional(),
    _ng_task_index: z.number().int().min(0).optional(),
    _ng_rollout_index: z.number().int().min(0).optional(),
    _ng_rollout_id: z.union([z.string().min(1).max(256), z.number().int().min(0)]).optional(),
    /** NeMo Gym's retry count of the row (echoed). */
    _ng_attempt_index: z.number().int().min(0).optional(),
    /** NeMo RL's index of the row in its batch (echoed). */
    _rowidx: z.number().int().min(0).optional(),
    /** NeMo Gym's agent server of the row (echoed; `/aggregate_metrics` groups by its name). */
    agent_ref: z.object({ name: z.string().min(1).max(256) }).catchall(z.unknown()).optional(),
    policy: PolicySchema.optional(),
  })
  .catchall(z.unknown());
export type RunBody = z.infer<typeof RunBodySchema>;

/** The row's fields serve reads itself; every other field is an extra, echoed on the response. */
const READ_KEYS = new Set(['responses_create_params', 'expected_answer', 'question', 'source_id', 'category', 'l2_category', 'ans_type', '_ng_task_index', '_ng_rollout_index', '_ng_rollout_id', 'policy']);

/** The bounds of a request (`serve.*`). */
export interface RequestBounds {
  maxImageBytes: number;
  maxImages: number;
  /** The policy endpoints the workers may send their key to: `policy_base_url` and `policy.allowed_base_urls`. */
  allowedBaseUrls: readonly string[];
}

export interface ParsedImage {
  mime: RequestImageMime;
  sha256: string;
  bytes: Buffer;
}

/** A request, checked: what serve keeps of it. */
export interface ParsedRun {
  body: RunBody;
  /** The client's rollout id (`_ng_rollout_id` as a string), or null when it gave none. */
  ngRolloutId: string | null;
  /** The request's input_text: the agent's prompt. */
  prompt: string;
  images: ParsedImage[];
  ansType: z.infer<typeof AnsTypeSchema>;
  /** The endpoint asked for, credentials removed; null: the run's. */
  baseUrl: string | null;
  /** SHA-256 of the body as sent (canonical JSON): the same id with another row is refused. */
  fingerprint: string;
  /** The row's other fields (`agent_ref`, `_rowidx`, `_ng_attempt_index`, any `_ng_*`...), echoed on the response as given. */
  extras: Record<string, unknown>;
}

const mib = (bytes: number) => `${Math.round((bytes / 1024 / 1024) * 10) / 10} MiB`;

/** The value at a path of parsed JSON (undefined when absent). */
function valueAt(json: unknown, path: readonly PropertyKey[]): unknown {
  let at = json;
  for (const p of path) at = at !== null && typeof at === 'object' ? (at as Record<PropertyKey, unknown>)[p] : undefined;
  return at;
}

/** A zod issue as one line naming its field. */
function issueText(issue: z.core.$ZodIssue, json: unknown): string {
  const at = issue.path.length ? issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').replace(/^\./, '') : 'the body';
  if (issue.code === 'unrecognized_keys') return `unknown field(s) ${issue.keys.map((k) => `"${k}"`).join(', ')} in ${at === 'the body' ? 'the row' : at}`;
  if (issue.path.length && valueAt(json, issue.path) === undefined) return `${at} is missing`;
  return `${at}: ${issue.message}`;
}

const DATA_URL = /^data:(image\/[a-z0-9.+-]+);base64,/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function parseImage(url: string, at: string, bounds: RequestBounds): ParsedImage {
  const m = DATA_URL.exec(url);
  if (!m) throw new RequestRefused(400, `${at}.image_url must be a data: URL of a PNG, JPEG or WebP image (data:image/png;base64,...); a http(s) URL is not fetched`);
  const payload = url.slice(m[0].length);
  if (Math.floor((payload.length * 3) / 4) > bounds.maxImageBytes + 3) {
    throw new RequestRefused(413, `${at} is about ${mib((payload.length * 3) / 4)}, over the ${mib(bounds.maxImageBytes)} bound of one image (serve.max_image_mib)`);
  }
  if (payload.length === 0 || payload.length % 4 !== 0 || !BASE64.test(payload)) throw new RequestRefused(400, `${at}.image_url: the image data is not base64`);
  const bytes = Buffer.from(payload, 'base64');
  if (bytes.length > bounds.maxImageBytes) throw new RequestRefused(413, `${at} is ${mib(bytes.length)}, over the ${mib(bounds.maxImageBytes)} bound of one image (serve.max_image_mib)`);
  const mime = requestImageMime(bytes);
  if (mime === null) throw new RequestRefused(400, `${at}.image_url: the image is not PNG, JPEG or WebP (by its first bytes); convert it to one of those`);
  if (m[1] !== mime) throw new RequestRefused(400, `${at}.image_url says ${m[1]} but its bytes are ${mime}: label it ${mime}`);
  return { mime, bytes, sha256: createHash('sha256').update(bytes).digest('hex') };
}

const normal = (url: string) => stripCredentials(url).replace(/\/+$/, '');

/** Parse and check one `POST /run` body (already JSON); throws RequestRefused naming what is wrong. */
export function parseRunBody(json: unknown, bounds: RequestBounds): ParsedRun {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new RequestRefused(400, 'the body must be a JSON object: one row of the dataset');
  const parsed = RunBodySchema.safeParse(json);
  if (!parsed.success) throw new RequestRefused(400, parsed.error.issues.slice(0, 5).map((i) => issueText(i, json)).join('; '));
  const body = parsed.data;
  const content = body.responses_create_params.input[0].content;
  const texts = content.filter((p) => p.type === 'input_text');
  if (texts.length !== 1) throw new RequestRefused(400, `responses_create_params.input[0].content must have one input_text part (the prompt), not ${texts.length}`);
  const imageParts = content.flatMap((p, i) => (p.type === 'input_image' ? [{ p, i }] : []));
  if (imageParts.length === 0) throw new RequestRefused(400, 'responses_create_params.input[0].content has no input_image part: a row needs its image as a data: URL');
  if (imageParts.length > bounds.maxImages) throw new RequestRefused(413, `responses_create_params.input[0].content has ${imageParts.length} input_image parts, over the bound of ${bounds.maxImages} (serve.max_images)`);
  const images = imageParts.map(({ p, i }) => parseImage(p.image_url, `responses_create_params.input[0].content[${i}]`, bounds));
  let baseUrl: string | null = null;
  if (body.policy?.base_url !== undefined) {
    const asked = normal(body.policy.base_url);
    if (!bounds.allowedBaseUrls.some((u) => normal(u) === asked)) {
      throw new RequestRefused(400, `policy.base_url ${asked} is not an endpoint the workers send their key to: add it to policy.allowed_base_urls (of serve and of the sandbox workers), or leave policy.base_url out`);
    }
    baseUrl = asked;
  }
  const gold = String(body.expected_answer);
  const extras: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) if (!READ_KEYS.has(key) && value !== undefined) Object.defineProperty(extras, key, { value, enumerable: true, writable: true, configurable: true });
  return {
    body,
    ngRolloutId: body._ng_rollout_id === undefined ? null : String(body._ng_rollout_id),
    prompt: (texts[0] as z.infer<typeof InputText>).text,
    images,
    // A gold of one capital letter is a choice (BabyVision's choice answers are letters).
    ansType: body.ans_type ?? (/^[A-Z]$/.test(gold) ? 'choice' : 'blank'),
    baseUrl,
    fingerprint: createHash('sha256').update(canonicalJson(json)).digest('hex'),
    extras,
  };
}

/** JSON with object keys sorted: the same row gives the same text whatever the client's key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
