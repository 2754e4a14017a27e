/**
 * The one request the gateway forwards: an OpenAI chat-completions call, parsed strictly. The body
 * comes from the sandbox (attacker input): every field is known and typed, unknown fields are
 * refused, and the gateway itself sets what the sandbox must not choose (the model, the output cap,
 * usage in streams). What OpenCode 1.17.11 sends fits this schema (test/agent checks it against the
 * real binary).
 */
import { z } from 'zod';

const TextPart = z.object({ type: z.literal('text'), text: z.string() }).strict();

/** The image types a data URL may carry, and the bytes each starts with. */
const IMAGE_MAGIC: Record<string, (b: Buffer) => boolean> = {
  'image/png': (b) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  'image/jpeg': (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff,
  'image/webp': (b) => b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP',
  'image/gif': (b) => /^GIF8[79]a$/.test(b.subarray(0, 6).toString('latin1')),
};
const DATA_URL = /^data:(image\/[a-z]+);base64,/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Why an image URL is not forwarded, or null: only `data:` URLs of PNG, JPEG, WebP or GIF whose bytes
 * are that type. A URL (`http://...`) would make the policy server fetch it from its own network.
 */
export function imageUrlProblem(url: string): string | null {
  const m = DATA_URL.exec(url);
  if (!m) return 'only data: URLs of images are forwarded (an http(s) URL would be fetched by the policy server)';
  const check = IMAGE_MAGIC[m[1]];
  if (!check) return `${m[1]} is not an accepted image type (image/png, image/jpeg, image/webp, image/gif)`;
  const payload = url.slice(m[0].length);
  if (payload.length === 0 || !BASE64.test(payload)) return 'the image data is not base64';
  if (!check(Buffer.from(payload.slice(0, 64), 'base64'))) return `the image data is not ${m[1]}`;
  return null;
}

const ImagePart = z
  .object({
    type: z.literal('image_url'),
    image_url: z
      .object({ url: z.string().superRefine((url, ctx) => {
        const problem = imageUrlProblem(url);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      }), detail: z.enum(['auto', 'low', 'high']).optional() })
      .strict(),
  })
  .strict();
const ContentPart = z.discriminatedUnion('type', [TextPart, ImagePart]);

const ToolCall = z
  .object({
    id: z.string().max(512),
    type: z.literal('function'),
    function: z.object({ name: z.string().max(256), arguments: z.string() }).strict(),
  })
  .strict();

const Message = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
    content: z.union([z.string(), z.array(ContentPart).max(1000)]).nullable().optional(),
    name: z.string().max(256).optional(),
    tool_calls: z.array(ToolCall).max(256).optional(),
    tool_call_id: z.string().max(512).optional(),
    reasoning_content: z.string().optional(),
  })
  .strict();

const Tool = z
  .object({
    type: z.literal('function'),
    function: z
      .object({
        name: z.string().max(256),
        description: z.string().optional(),
        parameters: z.record(z.string(), z.unknown()).optional(),
        strict: z.boolean().optional(),
      })
      .strict(),
  })
  .strict();

const ToolChoice = z.union([
  z.enum(['auto', 'none', 'required']),
  z.object({ type: z.literal('function'), function: z.object({ name: z.string() }).strict() }).strict(),
]);

export const ChatRequestSchema = z
  .object({
    model: z.string(),
    messages: z.array(Message).min(1).max(20_000),
    tools: z.array(Tool).max(128).optional(),
    tool_choice: ToolChoice.optional(),
    parallel_tool_calls: z.boolean().optional(),
    stream: z.boolean().optional(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).strict().optional(),
    max_tokens: z.number().int().positive().optional(),
    max_completion_tokens: z.number().int().positive().optional(),
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().min(0).max(1).optional(),
    stop: z.union([z.string(), z.array(z.string()).max(16)]).optional(),
    seed: z.number().int().optional(),
    n: z.literal(1).optional(),
    presence_penalty: z.number().min(-2).max(2).optional(),
    frequency_penalty: z.number().min(-2).max(2).optional(),
    logprobs: z.boolean().optional(),
    top_logprobs: z.number().int().min(0).max(20).optional(),
  })
  .strict();
export type ChatRequest = z.infer<typeof ChatRequestSchema>;
export type ChatMessage = z.infer<typeof Message>;

export type ParsedChat = { ok: true; body: ChatRequest } | { ok: false; message: string };

/** Parse a request body (bytes) as a chat-completions call; never throws. */
export function parseChatRequest(raw: Buffer): ParsedChat {
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch {
    return { ok: false, message: 'the request body is not JSON' };
  }
  const parsed = ChatRequestSchema.safeParse(json);
  if (parsed.success) return { ok: true, body: parsed.data };
  const issues = parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`);
  return { ok: false, message: `the request body is not a chat-completions call the gateway forwards (${issues.join('; ')})` };
}

export interface ChatPolicy {
  /** The policy model; whatever the sandbox asked for is replaced by it. */
  model: string;
  /** Output cap per call, in tokens; larger requests are lowered to it, absent ones set to it. */
  maxOutputTokens: number;
}

/** The body to forward: the model set, the output cap enforced, usage asked for in streams. */
export function enforceChatPolicy(body: ChatRequest, policy: ChatPolicy): ChatRequest {
  const out: ChatRequest = { ...body, model: policy.model };
  const cap = (n: number | undefined) => (n === undefined ? undefined : Math.min(n, policy.maxOutputTokens));
  out.max_tokens = cap(out.max_tokens);
  out.max_completion_tokens = cap(out.max_completion_tokens);
  if (out.max_tokens === undefined && out.max_completion_tokens === undefined) out.max_tokens = policy.maxOutputTokens;
  if (out.stream) out.stream_options = { ...out.stream_options, include_usage: true };
  else delete out.stream_options;
  return out;
}
