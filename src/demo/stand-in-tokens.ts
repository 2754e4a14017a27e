/**
 * The token fields of `vcfleet stand-in policy`, as vLLM serving Qwen3 returns them when asked
 * (`return_token_ids`, `logprobs`, `return_tokens_as_token_ids`; not streamed, as token capture asks):
 * the prompt's ids from Qwen3's real chat template and tokenizer (spliced on the ids an earlier
 * assistant message carries, as NeMo RL's vLLM server does), the generation's ids from the scripted
 * reply written as Qwen3 writes it (an empty think block, its text, hermes tool calls), and a
 * deterministic log-probability per generated id. The message is what vLLM's qwen3 reasoning and
 * hermes tool parsers make of that generation.
 */
import type { ChatRequestBody, ScriptReply } from './scripted-policy-types.ts';
import { IM_END, parseGeneration, promptIds, qwen3, qwen3Logprob, qwen3Raw, type Qwen3Switches } from './qwen3-template.ts';

const SWITCHES: Qwen3Switches = { reasoningField: 'reasoning', splice: true, contextWindow: 1 << 20 };

/** Whether a request asks for token ids (and is answered by `tokenCompletion`). */
export const asksForTokenIds = (body: ChatRequestBody): boolean => body.stream !== true && body.return_token_ids === true;

/** A chat.completion with the token fields, for a text or tool-calls reply. */
export function tokenCompletion(body: ChatRequestBody, reply: Extract<ScriptReply, { kind: 'text' | 'tool_calls' }>, index: number, modelName: string): Record<string, unknown> {
  const prompt = promptIds(body as Record<string, unknown>, SWITCHES).ids;
  const calls = reply.kind === 'tool_calls' ? reply.calls.map((c) => ({ name: c.name, arguments: typeof c.arguments === 'string' ? JSON.parse(c.arguments) as unknown : c.arguments })) : [];
  const raw = qwen3Raw(reply.text ?? '', calls);
  const cut = reply.kind === 'text' && reply.finishReason === 'length';
  const gen = [...qwen3().encode(raw), ...(cut ? [] : [IM_END])];
  const message = parseGeneration(raw, index);
  const asToken = (id: number) => (body.return_tokens_as_token_ids === true ? `token_id:${id}` : String(id));
  const logprobs = body.logprobs === true ? { content: gen.map((id) => ({ token: asToken(id), logprob: qwen3Logprob(id), bytes: [], top_logprobs: [] })) } : null;
  return {
    id: `chatcmpl-stand-in-${index}`, object: 'chat.completion', created: Math.floor(Date.now() / 1000), model: body.model ?? modelName,
    choices: [{ index: 0, message, logprobs, finish_reason: cut ? 'length' : message.tool_calls ? 'tool_calls' : 'stop', token_ids: gen }],
    usage: { prompt_tokens: prompt.length, completion_tokens: gen.length, total_tokens: prompt.length + gen.length },
    prompt_token_ids: prompt,
  };
}
