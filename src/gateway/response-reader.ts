/**
 * Reads the policy server's answer to one chat call as it passes through the gateway: the assistant
 * text, reasoning and tool calls (assembled from SSE deltas, or from a JSON body), the finish reason,
 * token usage, and the error message of a non-2xx answer. This is what the gateway itself saw of the
 * policy server; the outcome of a rollout is decided from it, never from what the sandbox prints.
 * Everything kept is bounded.
 */

export interface AssembledToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface AssembledResponse {
  text: string;
  reasoning: string | null;
  toolCalls: AssembledToolCall[];
  finishReason: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
  /** For a non-2xx answer: the server's error message and code, when it sent an OpenAI error object. */
  errorMessage: string | null;
  errorCode: string | null;
  /** Parts were cut to stay within the bounds. */
  truncated: boolean;
}

/** Assistant text kept per call (its end is kept when longer: that is where the answer is). */
export const MAX_TEXT_CHARS = 2_000_000;
const MAX_TOOL_CALLS = 256;
const MAX_ARGUMENT_CHARS = 200_000;
/** A JSON (non-stream) body is parsed only up to this size. */
const MAX_JSON_BYTES = 64 * 1024 * 1024;

type Json = Record<string, unknown>;
const obj = (v: unknown): Json | null => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : null);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const int = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? Math.max(0, Math.round(v)) : null);

export class ResponseReader {
  private text = '';
  private reasoning: string | null = null;
  private readonly tools = new Map<number, AssembledToolCall>();
  private finishReason: string | null = null;
  private promptTokens: number | null = null;
  private completionTokens: number | null = null;
  private truncated = false;
  private buffer = '';
  private readonly decoder = new TextDecoder();
  private readonly body: Buffer[] = [];
  private bodyBytes = 0;
  /** Every parsed SSE data object, when asked for (policy.capture: token ids, logprobs). */
  readonly chunks: unknown[] | null;

  /** `assemble: false` reads nothing (a call that is not the agent's: only its bytes pass through). */
  constructor(private readonly sse: boolean, keepChunks = false, private readonly assemble = true) {
    this.chunks = keepChunks ? [] : null;
  }

  push(bytes: Buffer): void {
    if (!this.assemble) return;
    if (!this.sse) {
      if (this.bodyBytes + bytes.length <= MAX_JSON_BYTES) this.body.push(bytes);
      else this.truncated = true;
      this.bodyBytes += bytes.length;
      return;
    }
    this.buffer += this.decoder.decode(bytes, { stream: true });
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      this.line(this.buffer.slice(0, nl).replace(/\r$/, ''));
      this.buffer = this.buffer.slice(nl + 1);
    }
    // A "line" that never ends is not an SSE event worth keeping.
    if (this.buffer.length > MAX_TEXT_CHARS) {
      this.buffer = '';
      this.truncated = true;
    }
  }

  /** The response as assembled; `status` decides whether the body is read as an error. */
  finish(status: number | null): AssembledResponse {
    let errorMessage: string | null = null;
    let errorCode: string | null = null;
    if (!this.assemble) {
      // nothing was read
    } else if (this.sse) {
      if (this.buffer) this.line(this.buffer);
      this.buffer = '';
    } else {
      const raw = Buffer.concat(this.body).toString('utf8');
      let json: unknown = null;
      try {
        json = JSON.parse(raw);
      } catch {
        json = null;
      }
      if (status !== null && status >= 200 && status < 300) this.message(obj(json));
      else {
        const err = obj(obj(json)?.error) ?? obj(json);
        errorMessage = (str(err?.message) ?? (raw.trim() || null))?.slice(0, 2000) ?? null;
        errorCode = str(err?.code) ?? str(err?.type);
      }
    }
    return {
      text: this.text,
      reasoning: this.reasoning,
      toolCalls: [...this.tools.entries()].sort(([a], [b]) => a - b).map(([, t]) => t),
      finishReason: this.finishReason,
      promptTokens: this.promptTokens,
      completionTokens: this.completionTokens,
      errorMessage,
      errorCode,
      truncated: this.truncated,
    };
  }

  private line(line: string): void {
    if (!line.startsWith('data:')) return;
    const data = line.slice(5).trim();
    if (!data || data === '[DONE]') return;
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch {
      this.chunks?.push({ unparsed: data.slice(0, 10_000) });
      return;
    }
    this.chunks?.push(chunk);
    const c = obj(chunk);
    this.usage(obj(c?.usage));
    for (const choice of Array.isArray(c?.choices) ? c.choices : []) {
      const ch = obj(choice);
      if (!ch || (ch.index !== undefined && ch.index !== 0)) continue;
      this.finishReason = str(ch.finish_reason) ?? this.finishReason;
      const delta = obj(ch.delta);
      if (!delta) continue;
      this.appendText(str(delta.content));
      this.appendReasoning(str(delta.reasoning_content) ?? str(delta.reasoning));
      for (const t of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) this.toolDelta(obj(t));
    }
  }

  /** A whole (non-stream) chat.completion body. */
  private message(body: Json | null): void {
    this.usage(obj(body?.usage));
    const choice = obj(Array.isArray(body?.choices) ? body.choices[0] : null);
    this.finishReason = str(choice?.finish_reason);
    const msg = obj(choice?.message);
    this.appendText(str(msg?.content));
    this.appendReasoning(str(msg?.reasoning_content) ?? str(msg?.reasoning));
    (Array.isArray(msg?.tool_calls) ? msg.tool_calls : []).forEach((t, index) => this.toolDelta({ ...obj(t), index }));
  }

  private usage(u: Json | null): void {
    if (!u) return;
    this.promptTokens = int(u.prompt_tokens) ?? int(u.input_tokens) ?? this.promptTokens;
    this.completionTokens = int(u.completion_tokens) ?? int(u.output_tokens) ?? this.completionTokens;
  }

  private appendText(piece: string | null): void {
    if (!piece) return;
    this.text += piece;
    if (this.text.length > MAX_TEXT_CHARS) {
      this.text = this.text.slice(-MAX_TEXT_CHARS);
      this.truncated = true;
    }
  }

  private appendReasoning(piece: string | null): void {
    if (!piece) return;
    this.reasoning = ((this.reasoning ?? '') + piece).slice(-MAX_TEXT_CHARS);
  }

  private toolDelta(t: Json | null): void {
    if (!t) return;
    const index = int(t.index) ?? 0;
    let call = this.tools.get(index);
    if (!call) {
      if (this.tools.size >= MAX_TOOL_CALLS) {
        this.truncated = true;
        return;
      }
      this.tools.set(index, (call = { id: '', name: '', arguments: '' }));
    }
    const fn = obj(t.function);
    call.id ||= str(t.id) ?? '';
    call.name ||= str(fn?.name) ?? '';
    const args = str(fn?.arguments);
    if (args) {
      call.arguments += args;
      if (call.arguments.length > MAX_ARGUMENT_CHARS) {
        call.arguments = call.arguments.slice(0, MAX_ARGUMENT_CHARS);
        this.truncated = true;
      }
    }
  }
}
