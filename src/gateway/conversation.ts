/**
 * OpenCode's own conversation, as the gateway sees it, and what each of its calls adds.
 *
 * Which calls are the agent's: the sandbox holds the gateway's token too (it is in OpenCode's
 * environment), so anything it runs can send chat calls of its own. Those calls are the model's
 * doing, never the agent's conversation: they buy no time, mask nothing and never reach the
 * transcript, the answer or the trajectory. Where the provider vouches for the origin of each
 * connection (a bridge outside the sandbox saw which process made it), that decides. Otherwise the
 * conversation's chain does: the first call is OpenCode's (nothing else runs before the model has
 * answered once); OpenCode makes one call at a time; and each of its calls repeats the previous one
 * (a retry) or extends it by the answer the gateway returned (its tool calls, by id) and the results
 * that followed. Anything else is counted as forged.
 *
 * What each agent call adds, for the transcript: the results of the model's previous tool calls (as
 * the model was shown them) and the images it was shown, each image stored once by SHA-256 within a
 * byte budget and a count. OpenCode re-sends the whole history on every call, so only the messages
 * beyond the previous request's are read.
 */
import { createHash } from 'node:crypto';
import type { ChatMessage } from './chat-request.ts';
import type { KeptText } from './kept-text.ts';

/** Who made a call's connection, as the provider tells it: the agent process, another process, or unknown. */
export type CallOrigin = 'agent' | 'other' | 'unknown';

export interface ToolResultView {
  toolCallId: string;
  /** The tool's output as sent to the model (bounded: the middle of a long output is cut). */
  output: string;
  /** Images sent with the result (OpenCode attaches what `read` returned in a user message after it). */
  images: string[];
}

export interface RequestView {
  toolResults: ToolResultView[];
  /** Images shown outside tool results (the puzzle in the first call). */
  shownImages: string[];
}

export interface StoredImage {
  mime: string;
  /** Null when the byte budget was spent: the image is known by hash only. */
  bytes: Buffer | null;
}

const DATA_URL = /^data:(image\/[\w.+-]+);base64,/;
/** Tool output kept per result in the transcript: head and tail of this many characters each. */
const KEEP_OUTPUT_CHARS = 50_000;
/** Distinct images kept per rollout; more are counted, not stored. */
export const MAX_IMAGES = 1000;
/** Images listed per tool result or per request (deduplicated). */
const MAX_LISTED_IMAGES = 64;

function bounded(text: string): string {
  if (text.length <= 2 * KEEP_OUTPUT_CHARS) return text;
  const cut = text.length - 2 * KEEP_OUTPUT_CHARS;
  return `${text.slice(0, KEEP_OUTPUT_CHARS)}\n[... ${cut} characters cut ...]\n${text.slice(-KEEP_OUTPUT_CHARS)}`;
}

/** The images of a rollout, once each, within `budgetBytes` and MAX_IMAGES. */
export class ImageStore {
  readonly images = new Map<string, StoredImage>();
  private spent = 0;
  /** Some images were kept by hash only. */
  overBudget = false;
  /** Images not recorded at all (past MAX_IMAGES). */
  dropped = 0;

  constructor(private readonly budgetBytes: number) {}

  /** Store a data URL's image; returns its SHA-256, or null when it is not a base64 image URL (or past the count). */
  addDataUrl(url: string): string | null {
    const match = DATA_URL.exec(url);
    if (!match) return null;
    const bytes = Buffer.from(url.slice(match[0].length), 'base64');
    const sha = createHash('sha256').update(bytes).digest('hex');
    if (!this.images.has(sha)) {
      if (this.images.size >= MAX_IMAGES) {
        this.dropped++;
        return null;
      }
      const fits = this.spent + bytes.length <= this.budgetBytes;
      if (fits) this.spent += bytes.length;
      else this.overBudget = true;
      this.images.set(sha, { mime: match[1], bytes: fits ? bytes : null });
    }
    return sha;
  }
}

function partsOf(content: ChatMessage['content']): { text: string; imageUrls: string[] } {
  if (typeof content === 'string') return { text: content, imageUrls: [] };
  const texts: string[] = [];
  const imageUrls: string[] = [];
  for (const part of content ?? []) {
    if (part.type === 'text') texts.push(part.text);
    else imageUrls.push(part.image_url.url);
  }
  return { text: texts.join('\n'), imageUrls };
}

/** Adds `shas` to `list` once each, up to MAX_LISTED_IMAGES. */
function addImages(list: string[], shas: readonly string[]): void {
  for (const sha of shas) if (list.length < MAX_LISTED_IMAGES && !list.includes(sha)) list.push(sha);
}

/** Reads what each agent call of one rollout adds, in order. */
export class ConversationReader {
  private seen = 0;

  constructor(private readonly store: ImageStore, private readonly kept: KeptText) {}

  read(messages: readonly ChatMessage[]): RequestView {
    // A history no longer than before is a retry (nothing new) or a new conversation.
    const fresh = messages.length > this.seen ? messages.slice(this.seen) : messages;
    this.seen = messages.length;
    const view: RequestView = { toolResults: [], shownImages: [] };
    let lastWasTool = false;
    for (const m of fresh) {
      const { text, imageUrls } = partsOf(m.content);
      const shas = imageUrls.map((u) => this.store.addDataUrl(u)).filter((s): s is string => s !== null);
      if (m.role === 'tool') {
        const images: string[] = [];
        addImages(images, shas);
        view.toolResults.push({ toolCallId: m.tool_call_id ?? '', output: this.kept.keep(bounded(text)), images });
        lastWasTool = true;
        continue;
      }
      const target = lastWasTool && m.role === 'user' ? view.toolResults.at(-1) : undefined;
      addImages(target ? target.images : view.shownImages, shas);
      lastWasTool = lastWasTool && m.role === 'user';
    }
    return view;
  }
}

function messageHash(m: ChatMessage): string {
  return createHash('sha256').update(JSON.stringify(m)).digest('hex');
}

function startsWith(hashes: readonly string[], prefix: readonly string[]): boolean {
  return prefix.length <= hashes.length && prefix.every((h, i) => hashes[i] === h);
}

/** The last agent call: its request, and the tool calls of its answer (null until it was answered). */
interface Tip {
  request: string[];
  answeredWith: string[] | null;
}

/** Tells the agent's own calls from the others (see the file comment). */
export class ConversationTracker {
  private tip: Tip | null = null;
  private inFlight = 0;

  /** Whether a call with these messages, on a connection of this origin, is the agent's. */
  isAgentCall(messages: readonly ChatMessage[], origin: CallOrigin): boolean {
    if (origin !== 'unknown') return origin === 'agent';
    if (this.inFlight > 0) return false;
    if (this.tip === null) return true;
    const hashes = messages.map(messageHash);
    const { request, answeredWith } = this.tip;
    if (!startsWith(hashes, request)) return false;
    // A retry repeats a call that got no answer; an answered one is never sent again.
    if (hashes.length === request.length) return answeredWith === null;
    if (answeredWith === null) return false;
    const next = messages[request.length];
    const ids = (next.tool_calls ?? []).map((t) => t.id);
    if (next.role !== 'assistant' || ids.length !== answeredWith.length || ids.some((id, i) => id !== answeredWith[i])) return false;
    return messages.slice(request.length + 1).every((m) => m.role === 'tool' || m.role === 'user');
  }

  /** An agent call was sent with these messages (their chain is kept only where the origin is unknown). */
  started(messages: readonly ChatMessage[], origin: CallOrigin): void {
    this.inFlight++;
    if (origin === 'unknown') this.tip = { request: messages.map(messageHash), answeredWith: null };
  }

  /** The agent call ended; `toolCallIds` of its answer when it was answered, else null. */
  ended(toolCallIds: readonly string[] | null): void {
    this.inFlight = Math.max(0, this.inFlight - 1);
    if (this.tip && toolCallIds !== null) this.tip.answeredWith = [...toolCallIds];
  }
}
