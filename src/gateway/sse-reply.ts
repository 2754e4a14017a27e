/**
 * A whole chat.completion turned into the SSE stream OpenCode asked for: the same message as
 * `chat.completion.chunk` deltas (text, reasoning, each tool call), the finish reason, the usage, and
 * `[DONE]`. With token capture the gateway asks upstream without streaming and streams here. Pure.
 */
type Json = Record<string, unknown>;
const obj = (v: unknown): Json | null => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : null);

function event(data: unknown): string {
  return `data: ${JSON.stringify(data)}\n\n`;
}

/** The SSE body for `completion` (a parsed 2xx chat.completion body). */
export function sseFromCompletion(completion: Json): string {
  const base = { id: typeof completion.id === 'string' ? completion.id : 'chatcmpl-gateway', object: 'chat.completion.chunk', created: typeof completion.created === 'number' ? completion.created : Math.floor(Date.now() / 1000), model: completion.model };
  const choice = obj(Array.isArray(completion.choices) ? completion.choices[0] : null);
  const msg = obj(choice?.message) ?? {};
  const chunk = (delta: Json, finish: unknown = null) => event({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] });
  let out = chunk({ role: 'assistant', content: '' });
  const reasoning = typeof msg.reasoning_content === 'string' ? msg.reasoning_content : typeof msg.reasoning === 'string' ? msg.reasoning : null;
  if (reasoning) out += chunk({ reasoning_content: reasoning });
  if (typeof msg.content === 'string' && msg.content !== '') out += chunk({ content: msg.content });
  const tools = Array.isArray(msg.tool_calls) ? msg.tool_calls : [];
  tools.forEach((t, index) => {
    const tc = obj(t);
    const fn = obj(tc?.function);
    out += chunk({ tool_calls: [{ index, id: tc?.id, type: 'function', function: { name: fn?.name, arguments: typeof fn?.arguments === 'string' ? fn.arguments : '' } }] });
  });
  out += chunk({}, choice?.finish_reason ?? 'stop');
  if (obj(completion.usage)) out += event({ ...base, choices: [], usage: completion.usage });
  return `${out}data: [DONE]\n\n`;
}
