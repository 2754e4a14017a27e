/**
 * Reading `opencode run --format json` output: one JSON event per line (`step_start`, `tool_use`,
 * `text`, `step_finish`, `error`). The log keeps every event (image data URLs replaced by short
 * placeholders), the assistant text in order, the tool calls with input and output, and token usage
 * per step.
 */
import { extractBoxedAnswer } from '../../../shared/answer.ts';
import { redactImages } from '../gateway/redact-images.ts';

export interface ToolCallRecord {
  callId: string | null;
  tool: string;
  status: string;
  input: unknown;
  output?: string;
  error?: string;
  title?: string;
  step: number;
  durationMs?: number;
}

export interface StepRecord {
  step: number;
  reason: string | null;
  inputTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

export interface SessionError {
  name: string;
  message: string;
  statusCode?: number;
}

const MAX_BAD_LINES = 20;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export class SessionEventLog {
  sessionId: string | null = null;
  readonly events: unknown[] = [];
  readonly texts: Array<{ step: number; text: string }> = [];
  readonly toolCalls: ToolCallRecord[] = [];
  readonly steps: StepRecord[] = [];
  readonly errors: SessionError[] = [];
  readonly badLines: string[] = [];
  /** Number of `step_start` events: one per model call. */
  stepStarts = 0;
  /** Step of the last text holding a `\boxed{}` answer, -1 when none. */
  lastBoxStep = -1;
  /** Step of the last `step_finish` with reason `length`, -1 when none. */
  lastLengthStep = -1;

  /** Feed one stdout line; returns the event type (or null for a line that is not an event). */
  push(line: string): string | null {
    const trimmed = line.trim();
    if (!trimmed) return null;
    let event: Json;
    try {
      event = JSON.parse(trimmed) as Json;
    } catch {
      if (this.badLines.length < MAX_BAD_LINES) this.badLines.push(trimmed.slice(0, 2000));
      return null;
    }
    if (!event || typeof event !== 'object' || typeof event.type !== 'string') return null;
    this.sessionId ??= typeof event.sessionID === 'string' ? event.sessionID : null;
    this.events.push(redactImages(event));
    const part: Json = event.part ?? {};
    const step = Math.max(0, this.stepStarts - 1);
    switch (event.type) {
      case 'step_start':
        this.stepStarts++;
        break;
      case 'text':
        if (typeof part.text === 'string') {
          this.texts.push({ step, text: part.text });
          if (extractBoxedAnswer(part.text) !== null) this.lastBoxStep = step;
        }
        break;
      case 'tool_use': {
        const state: Json = part.state ?? {};
        const time: Json = state.time ?? {};
        this.toolCalls.push({
          callId: part.callID ?? null,
          tool: String(part.tool ?? 'unknown'),
          status: String(state.status ?? 'unknown'),
          input: redactImages(state.input),
          output: typeof state.output === 'string' ? state.output : undefined,
          error: typeof state.error === 'string' ? state.error : undefined,
          title: typeof state.title === 'string' ? state.title : undefined,
          step,
          durationMs: typeof time.start === 'number' && typeof time.end === 'number' ? time.end - time.start : undefined,
        });
        break;
      }
      case 'step_finish': {
        const tokens: Json = part.tokens ?? {};
        const reason = typeof part.reason === 'string' ? part.reason : null;
        this.steps.push({
          step,
          reason,
          inputTokens: Number(tokens.input ?? 0),
          outputTokens: Number(tokens.output ?? 0),
          reasoningTokens: Number(tokens.reasoning ?? 0),
          cacheReadTokens: Number(tokens.cache?.read ?? 0),
          cacheWriteTokens: Number(tokens.cache?.write ?? 0),
        });
        if (reason === 'length') this.lastLengthStep = step;
        break;
      }
      case 'error': {
        const err: Json = event.error ?? {};
        const data: Json = err.data ?? {};
        this.errors.push({
          name: String(err.name ?? 'Error'),
          message: String(data.message ?? err.message ?? JSON.stringify(err)).slice(0, 2000),
          statusCode: typeof data.statusCode === 'number' ? data.statusCode : undefined,
        });
        break;
      }
    }
    return event.type;
  }

  /** All assistant text of the session, in order. */
  responseText(): string {
    return this.texts.map((t) => t.text).join('\n\n');
  }

  /** Number of model calls (steps) OpenCode made. */
  turns(): number {
    return Math.max(this.stepStarts, this.steps.length);
  }

  /** Token totals over the finished steps (prompt tokens include cached ones; output includes reasoning). */
  tokenTotals(): { inputTokens: number; outputTokens: number } {
    let inputTokens = 0;
    let outputTokens = 0;
    for (const s of this.steps) {
      inputTokens += s.inputTokens + s.cacheReadTokens + s.cacheWriteTokens;
      outputTokens += s.outputTokens + s.reasoningTokens;
    }
    return { inputTokens, outputTokens };
  }
}
