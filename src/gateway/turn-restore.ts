/**
 * What goes upstream as the conversation's earlier assistant turns, with token capture on. OpenCode
 * sends each earlier turn back as it stored it, and the policy server re-renders it with its chat
 * template: a turn that re-renders differently from what the model generated breaks the token chain
 * (docs/train.md, "Which servers chain"). Two remedies, each a switch:
 *
 * - restore (`policy.token_capture_restore_turns`): each earlier assistant message is replaced by the
 *   message the server itself returned for that call: its content without the stray whitespace the
 *   parsers leave (the newlines after a think block, the newline before a tool call, which the
 *   template adds again), its reasoning under both `reasoning` and `reasoning_content` (servers read
 *   one or the other), its tool-call arguments as the server gave them.
 * - splice (`policy.token_capture_splice`): the latest answered call's assistant message carries its
 *   `prompt_token_ids`, `generation_token_ids` and `generation_log_probs`, the fields NeMo Gym puts
 *   on its assistant messages, so a splicing server (NeMo RL's vLLM server, which continues from the
 *   last message carrying them) continues from the exact ids instead of the re-rendered ones. Only
 *   that turn's ids are kept and sent: every earlier call's full prompt, kept and resent on every call,
 *   made a session's memory and each request grow with the square of its turns.
 *
 * Which turn an assistant message is goes by position and content, never by a tool-call id alone (the
 * model writes those ids, and may write one twice: `functions.bash:0`): the conversation's assistant
 * messages are its answered calls in order, so each message is the first turn, from just after the
 * previous message's, whose tool calls (ids, names, arguments as JSON) and text (whitespace aside) are
 * the message's. A message no turn matches is sent as OpenCode wrote it. Pure but for the turns it keeps.
 */
import type { ChatMessage } from './chat-request.ts';

type Json = Record<string, unknown>;

/** Token ids kept for splicing (the latest turn's prompt and generation); a turn with more carries none. */
const MAX_SPLICE_IDS = 16 << 20;

interface Turn {
  message: Json;
  toolCallIds: string[];
  promptIds: number[] | null;
  generationIds: number[] | null;
  logprobs: number[] | null;
}

export interface TurnRestoreOptions {
  restore: boolean;
  splice: boolean;
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

function toolCallsOf(message: Json): Json[] {
  return Array.isArray(message.tool_calls) ? (message.tool_calls.filter((t) => t && typeof t === 'object') as Json[]) : [];
}

/** The content the model generated, without the parsers' stray whitespace around a think block and before a tool call. */
export function generatedContent(message: Json): string {
  let content = str(message.content) ?? '';
  if (reasoningOf(message) !== null) content = content.replace(/^\n+/, '');
  if (toolCallsOf(message).length > 0) content = content.replace(/\s+$/, '');
  return content;
}

function reasoningOf(message: Json): string | null {
  return str(message.reasoning) ?? str(message.reasoning_content);
}

export class TurnRestorer {
  private readonly turns: Turn[] = [];

  constructor(private readonly options: TurnRestoreOptions) {}

  /** An answered call of the conversation: the server's message and its token ids (null when absent). */
  answered(message: Json | null, promptIds: number[] | null, generationIds: number[] | null, logprobs: number[] | null): void {
    const m = message ?? {};
    const ids = this.options.splice && promptIds && generationIds && promptIds.length + generationIds.length <= MAX_SPLICE_IDS;
    // The next call continues from this turn: the ids of the ones before are no longer needed.
    const before = this.turns.at(-1);
    if (before) before.promptIds = before.generationIds = before.logprobs = null;
    this.turns.push({
      message: m,
      toolCallIds: toolCallsOf(m).map((t) => String(t.id ?? '')),
      promptIds: ids ? promptIds : null,
      generationIds: ids ? generationIds : null,
      logprobs: ids ? logprobs : null,
    });
  }

  /** The messages to send upstream (the same array when nothing changes). */
  shape(messages: readonly ChatMessage[]): ChatMessage[] {
    if (!this.options.restore && !this.options.splice) return messages as ChatMessage[];
    let from = 0;
    return messages.map((m) => {
      if (m.role !== 'assistant') return m;
      const at = this.turns.findIndex((t, i) => i >= from && sameTurn(m as unknown as Json, t));
      if (at < 0) return m;
      from = at + 1;
      const turn = this.turns[at]!;
      let out: Json = { ...m };
      if (this.options.restore) out = restored(out, turn.message);
      if (this.options.splice && turn.promptIds && turn.generationIds) {
        out.prompt_token_ids = turn.promptIds;
        out.generation_token_ids = turn.generationIds;
        out.generation_log_probs = turn.logprobs ?? [];
      }
      return out as unknown as ChatMessage;
    });
  }
}

/** Text without its whitespace's shape (the parsers' stray newlines, OpenCode's trimming). */
function plainText(content: unknown): string {
  const text = Array.isArray(content) ? content.map((p) => str((p as Json | null)?.text) ?? '').join('') : (str(content) ?? '');
  return text.replace(/\s+/g, ' ').trim();
}

/** Arguments compared as JSON values (OpenCode writes them compactly again), else as text. */
function sameArguments(a: unknown, b: unknown): boolean {
  const parse = (v: unknown) => {
    try {
      return canonical(JSON.parse(str(v) ?? ''));
    } catch {
      return `text:${(str(v) ?? '').trim()}`;
    }
  };
  return parse(a) === parse(b);
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Json)[k])}`).join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

/** Whether OpenCode's message is this turn as generated: its tool calls (ids, names, arguments) and its text. */
function sameTurn(sent: Json, turn: Turn): boolean {
  const mine = toolCallsOf(sent);
  const generated = toolCallsOf(turn.message);
  if (mine.length !== generated.length) return false;
  const callsMatch = mine.every((c, i) => {
    const g = generated[i]!;
    const [f, gf] = [(c.function ?? {}) as Json, (g.function ?? {}) as Json];
    return String(c.id ?? '') === turn.toolCallIds[i] && str(f.name) === str(gf.name) && sameArguments(f.arguments, gf.arguments);
  });
  return callsMatch && plainText(sent.content) === plainText(turn.message.content);
}

/** The message OpenCode sent, with the content, reasoning and arguments the server returned for it. */
function restored(sent: Json, generated: Json): Json {
  const out: Json = { ...sent, content: generatedContent(generated) };
  const reasoning = reasoningOf(generated);
  if (reasoning !== null) {
    out.reasoning = reasoning;
    out.reasoning_content = reasoning;
  }
  const calls = toolCallsOf(generated);
  if (Array.isArray(sent.tool_calls) && calls.length === sent.tool_calls.length) {
    out.tool_calls = (sent.tool_calls as Json[]).map((t, i) => {
      const args = str((calls[i].function as Json | undefined)?.arguments);
      return args === null ? t : { ...t, function: { ...(t.function as Json), arguments: args } };
    });
  }
  return out;
}
