/**
 * What each forwarded request adds to the conversation, for the rollout's transcript: the results of
 * the model's previous tool calls (as the model was shown them) and the images it was shown, each
 * image stored once by SHA-256 within a byte budget. OpenCode re-sends the whole history on every
 * call, so only the messages beyond the previous request's are read.
 */
import { createHash } from 'node:crypto';
import type { ChatMessage } from './chat-request.ts';

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

function bounded(text: string): string {
  if (text.length <= 2 * KEEP_OUTPUT_CHARS) return text;
  const cut = text.length - 2 * KEEP_OUTPUT_CHARS;
  return `${text.slice(0, KEEP_OUTPUT_CHARS)}\n[... ${cut} characters cut ...]\n${text.slice(-KEEP_OUTPUT_CHARS)}`;
}

/** The images of a rollout, once each, within `budgetBytes`. */
export class ImageStore {
  readonly images = new Map<string, StoredImage>();
  private spent = 0;
  /** Some images were kept by hash only. */
  overBudget = false;

  constructor(private readonly budgetBytes: number) {}

  /** Store a data URL's image; returns its SHA-256, or null when it is not a base64 image URL. */
  addDataUrl(url: string): string | null {
    const match = DATA_URL.exec(url);
    if (!match) return null;
    const bytes = Buffer.from(url.slice(match[0].length), 'base64');
    const sha = createHash('sha256').update(bytes).digest('hex');
    if (!this.images.has(sha)) {
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

/** Reads each request of one rollout in order. */
export class ConversationReader {
  private seen = 0;

  constructor(private readonly store: ImageStore) {}

  read(messages: readonly ChatMessage[]): RequestView {
    // A shorter history than before is a new conversation (another session, or a forged call).
    const fresh = messages.length > this.seen ? messages.slice(this.seen) : messages;
    this.seen = messages.length;
    const view: RequestView = { toolResults: [], shownImages: [] };
    let lastWasTool = false;
    for (const m of fresh) {
      const { text, imageUrls } = partsOf(m.content);
      const shas = imageUrls.map((u) => this.store.addDataUrl(u)).filter((s): s is string => s !== null);
      if (m.role === 'tool') {
        view.toolResults.push({ toolCallId: m.tool_call_id ?? '', output: bounded(text), images: shas });
        lastWasTool = true;
        continue;
      }
      const target = lastWasTool && m.role === 'user' ? view.toolResults.at(-1) : undefined;
      if (target) target.images.push(...shas);
      else view.shownImages.push(...shas);
      lastWasTool = lastWasTool && m.role === 'user';
    }
    return view;
  }
}
