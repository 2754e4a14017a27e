/** The types of the scripted policy server and of its scripts (both import them from here). */

export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
}

export interface ChatRequestBody {
  model?: string;
  messages?: ChatMessage[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  max_tokens?: number;
  tools?: unknown[];
  [key: string]: unknown;
}

export type ScriptReply =
  | { kind: 'text'; text: string; finishReason?: 'stop' | 'length' }
  | { kind: 'tool_calls'; calls: Array<{ name: string; arguments: Record<string, unknown> | string }>; text?: string }
  | { kind: 'error'; status: number; body?: unknown; headers?: Record<string, string> }
  /** Accept the request and never answer. */
  | { kind: 'hang' }
  /** Destroy the connection without an answer. */
  | { kind: 'destroy' };

export interface ScriptContext {
  /** Free-form notes a script records for the test (e.g. "image-after-read"). */
  note(text: string): void;
}

/** Decides the reply to one chat-completions request; `index` counts every request from 0. */
export type Script = (body: ChatRequestBody, index: number, ctx: ScriptContext) => ScriptReply | Promise<ScriptReply>;
