/**
 * Reading token usage out of OpenAI-compatible responses: a JSON body, or an SSE stream whose last
 * chunks carry `usage` (with `stream_options.include_usage`) and the finish reason.
 */

export interface CallUsage {
  promptTokens: number | null;
  completionTokens: number | null;
  finishReason: string | null;
}

interface UsageLike {
  prompt_tokens?: number;
  completion_tokens?: number;
  input_tokens?: number;
  output_tokens?: number;
}

function fromChunk(chunk: unknown, into: CallUsage): void {
  if (!chunk || typeof chunk !== 'object') return;
  const c = chunk as { usage?: UsageLike | null; choices?: Array<{ finish_reason?: string | null }> };
  if (c.usage && typeof c.usage === 'object') {
    into.promptTokens = c.usage.prompt_tokens ?? c.usage.input_tokens ?? into.promptTokens;
    into.completionTokens = c.usage.completion_tokens ?? c.usage.output_tokens ?? into.completionTokens;
  }
  for (const choice of c.choices ?? []) if (choice?.finish_reason) into.finishReason = choice.finish_reason;
}

/** Usage of a plain JSON response body (null fields when absent or unparsable). */
export function usageFromJson(text: string): CallUsage {
  const usage: CallUsage = { promptTokens: null, completionTokens: null, finishReason: null };
  try {
    fromChunk(JSON.parse(text), usage);
  } catch {
    // not JSON: no usage
  }
  return usage;
}

/**
 * Incremental SSE reader: feed it bytes as they pass through; it keeps the usage seen so far and,
 * when `keepChunks`, every parsed `data:` object (unknown fields such as token ids and logprobs kept).
 */
export class SseUsageReader {
  readonly usage: CallUsage = { promptTokens: null, completionTokens: null, finishReason: null };
  readonly chunks: unknown[] = [];
  private buffer = '';
  private readonly decoder = new TextDecoder();

  constructor(private readonly keepChunks: boolean) {}

  push(bytes: Uint8Array): void {
    this.buffer += this.decoder.decode(bytes, { stream: true });
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl).replace(/\r$/, '');
      this.buffer = this.buffer.slice(nl + 1);
      this.line(line);
    }
  }

  end(): void {
    if (this.buffer) this.line(this.buffer);
    this.buffer = '';
  }

  private line(line: string): void {
    if (!line.startsWith('data:')) return;
    const data = line.slice(5).trim();
    if (!data || data === '[DONE]') return;
    try {
      const chunk = JSON.parse(data) as unknown;
      fromChunk(chunk, this.usage);
      if (this.keepChunks) this.chunks.push(chunk);
    } catch {
      if (this.keepChunks) this.chunks.push({ unparsed: data });
    }
  }
}
