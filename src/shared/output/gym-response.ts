/**
 * The `response` of NeMo Gym's verify-response row (gym-row.ts): the OpenAI Responses object of one
 * rollout, and its `output` items built from the rollout's transcript and trajectory.
 *
 * `response.output`: per policy call of the transcript, in order: a `reasoning` item (when the
 * server streamed reasoning), the assistant `message` (its text), a `function_call` per tool call;
 * then a `function_call_output` per tool result OpenCode sent back, its text; when images came with
 * it (a `read` of an image), they follow as a `user` message of `input_image` parts (data URLs), in
 * order, as the next call's prompt held them (the tool message, then a user message with the image):
 * that is where NeMo RL's image binning finds them (the content of an item that is not the
 * assistant's; it reads a `function_call_output` only when its whole output is one image URL), one
 * per image span of the next prompt. An image a later call shows outside a tool result is such a
 * message before that call's items. Only images whose bytes are at hand (`imageUrls`: those the
 * rollout kept within its image budget) are given; one kept by hash only is named in the tool's text
 * instead. Failed calls give no item. The call's last item
 * carries `prompt_token_ids` (the call's whole prompt, rebuilt from the chain), `generation_token_ids`
 * and `generation_log_probs` when the trajectory has all three for it. Without a transcript each
 * answered call of the trajectory is an assistant message with no content carrying its tokens;
 * with neither, one empty assistant message (as the reference pads an empty output). A transcript
 * cut to fit its bound (its `truncated` says how) gives what it kept: its texts as cut, and no item
 * for a turn it dropped.
 */
import type { TranscriptRecord, TranscriptTurn } from '../records/transcript.ts';
import type { Trajectory } from '../records/trajectory.ts';

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
export interface InputTextContent {
  type: 'input_text';
  text: string;
}
export interface InputImageContent {
  type: 'input_image';
  /** A `data:<mime>;base64,...` URL. */
  image_url: string;
  detail: 'auto';
}
export interface GymFunctionCallOutputItem {
  type: 'function_call_output';
  call_id: string;
  /** The tool's text. */
  output: string;
}
/** Images the prompt held outside the model's turns (NeMo Gym's `NeMoGymMessage`, role user). */
export interface GymUserImagesItem {
  type: 'message';
  role: 'user';
  status: 'completed';
  content: InputImageContent[];
}
export type GymOutputItem = GymReasoningItem | GymMessageItem | GymFunctionCallItem | GymFunctionCallOutputItem | GymUserImagesItem;

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

/** The id of the empty message that pads an output without one (not a turn of the model's). */
export const EMPTY_MESSAGE_ID = 'msg_empty';
const emptyMessage = (id: string): GymMessageItem => ({ type: 'message', id, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: '', annotations: [] }] });

/** The user message of the images at hand among `images` (none when no image is at hand). */
function userImages(images: readonly string[], imageUrls: ReadonlyMap<string, string>): GymUserImagesItem[] {
  const content: InputImageContent[] = [];
  for (const sha of images) {
    const url = imageUrls.get(sha);
    if (url !== undefined) content.push({ type: 'input_image', image_url: url, detail: 'auto' });
  }
  return content.length ? [{ type: 'message', role: 'user', status: 'completed', content }] : [];
}

/** A tool result's items: its text (naming any image not kept), then its images (see the header). */
function toolOutput(callId: string, text: string, images: readonly string[], imageUrls: ReadonlyMap<string, string>): GymOutputItem[] {
  const missing = images.filter((sha) => !imageUrls.has(sha));
  const note = missing.length ? `\n[${missing.length} image(s) not kept (over the rollout's image budget): ${missing.join(', ')}]` : '';
  return [{ type: 'function_call_output', call_id: callId, output: text + note }, ...userImages(images, imageUrls)];
}

/**
 * `response.output` (see the header) from the transcript and the trajectory, either of which may be
 * absent; `imageUrls`: the data URL of each image at hand, by SHA-256.
 */
export function responseOutput(
  transcript: Pick<TranscriptRecord, 'turns'> | null, trajectory: Pick<Trajectory, 'calls'> | null, imageUrls: ReadonlyMap<string, string> = new Map(),
): GymOutputItem[] {
  const tokens = trajectory ? callTokens(trajectory) : new Map<number, TokenFields>();
  const out: GymOutputItem[] = [];
  if (transcript) {
    transcript.turns.forEach((t, k) => {
      if (k > 0 && t.shown_images.length > 0) out.push(...userImages(t.shown_images, imageUrls));
      if (!answeredTurn(t)) return;
      const generated = generatedItems(t);
      const fields = tokens.get(t.index);
      if (fields) Object.assign(generated[generated.length - 1], fields);
      out.push(...generated);
      for (const c of t.tool_calls) {
        if (c.output === null) continue;
        out.push(...toolOutput(c.id, c.output, c.images, imageUrls));
      }
    });
  } else if (trajectory) {
    for (const c of trajectory.calls) {
      const fields = tokens.get(c.index);
      if (c.answered) out.push({ type: 'message', id: `msg_${c.index}`, role: 'assistant', status: c.finish_reason === 'length' ? 'incomplete' : 'completed', content: [], ...fields });
    }
  }
  if (!out.some((i) => i.type === 'message' && i.role === 'assistant')) out.push(emptyMessage(EMPTY_MESSAGE_ID));
  return out;
}
