/**
 * What token capture keeps of a rollout's calls, as the gateway saw them: for each call of the
 * agent's conversation its token ids, log-probabilities, finish reason, latency, the sampling applied,
 * the weight version and the images that entered the prompt since the previous answered call (by
 * SHA-256, in the order the model saw them); calls that are not the conversation's apart. The chain
 * is checked as calls arrive (each answered call's prompt must extend the previous answered call's
 * prompt + generation), so only what a call adds is kept: `prompt_token_ids` in full for the first
 * call and after a break, `inserted_token_ids` (what the environment added) otherwise. Everything
 * kept is bounded: ids per array (token-fields.ts) and ids per rollout. The images the answered calls
 * carried are kept too (bytes once each, within their own budget, apart from the transcript's), so
 * the results host can give a trainer every image of the prompts.
 */
import type { ChatMessage } from './chat-request.ts';
import { ImageStore, type CallOrigin, type StoredImage } from './conversation.ts';
import { TurnRestorer } from './turn-restore.ts';
import type { PolicySettings } from '../shared/config/run-settings.ts';
import type { TokenField, TokenFields } from '../shared/records/token-fields.ts';

/** Token ids kept per rollout (first prompt, inserted and generated ids together); past it none are kept. */
export const MAX_ROLLOUT_TOKEN_IDS = 4 << 20;
/** Images listed per call. */
const MAX_CALL_IMAGES = 256;
/** Calls that are not the conversation's, kept per rollout (more are counted). */
const MAX_OTHER_CALLS = 256;

export interface TokenCall {
  index: number;
  started_at: string;
  latency_ms: number;
  status: number | null;
  finish_reason: string | null;
  /** Answered (2xx): a step of the conversation. A failed call (its retry follows) is listed, never chained. */
  answered: boolean;
  /** Tokens in the call's prompt (null when the server did not say). */
  prompt_token_count: number | null;
  /** The whole prompt: for the first answered call, and for one that does not extend the previous. */
  prompt_token_ids?: number[];
  /** The prompt's tokens after the previous answered call's prompt + generation (the environment's). */
  inserted_token_ids?: number[];
  generation_token_ids: number[] | null;
  generation_log_probs: number[] | null;
  /** vLLM fields the answer did not carry (or carried malformed). */
  missing: TokenField[];
  /** The sampling fields the call was sent with. */
  sampling: Record<string, unknown>;
  weight_version: string | null;
  /** Images that entered the prompt since the previous answered call, by SHA-256, in order. */
  images: string[];
}

export interface OtherCall {
  index: number;
  origin: CallOrigin;
  status: number | null;
  latency_ms: number;
}

export interface ChainBreak {
  /** Index of the call whose prompt does not extend the previous answered call's. */
  call: number;
  /** First token position where it differs (null: the call had no ids to compare). */
  token: number | null;
  why: string;
}

export interface TokenCaptureRecord {
  calls: TokenCall[];
  /** Calls that were not the agent's conversation (never in the chain). */
  other_calls: OtherCall[];
  other_calls_dropped: number;
  chain: { contiguous: boolean; breaks: ChainBreak[] };
  /** Ids stopped being kept past MAX_ROLLOUT_TOKEN_IDS. */
  over_bounds: boolean;
  /** The images of the answered calls, by SHA-256 (bytes null past the budget). */
  images: ReadonlyMap<string, StoredImage>;
  /** Some image of an answered call is kept by hash only, or not listed (past the count). */
  images_over_budget: boolean;
}

/** SHA-256 of each image in `messages`, in order, stored in `store`. */
function imagesOf(messages: readonly ChatMessage[], store: ImageStore): { shas: string[]; unlisted: boolean } {
  const shas: string[] = [];
  let unlisted = false;
  for (const m of messages) {
    if (!Array.isArray(m.content)) continue;
    for (const part of m.content) {
      if (part.type !== 'image_url') continue;
      const sha = shas.length < MAX_CALL_IMAGES ? store.addDataUrl(part.image_url.url) : null;
      if (sha) shas.push(sha);
      else if (/^data:image\//.test(part.image_url.url)) unlisted = true;
    }
  }
  return { shas, unlisted };
}

function firstDifference(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return n;
}

export interface CallFacts {
  index: number;
  startedAt: string;
  latencyMs: number;
  status: number | null;
  answered: boolean;
  finishReason: string | null;
  promptTokens: number | null;
  messages: readonly ChatMessage[];
  tokens: TokenFields | null;
  sampling: Record<string, unknown>;
}

export class TokenRecorder {
  private readonly calls: TokenCall[] = [];
  private readonly others: OtherCall[] = [];
  private othersDropped = 0;
  private readonly breaks: ChainBreak[] = [];
  /** The previous answered call's prompt + generation; null before the first, or when it lacked ids. */
  private tip: number[] | null = null;
  private answeredBefore = false;
  private seenMessages = 0;
  private kept = 0;
  private overBounds = false;
  private readonly imageStore: ImageStore;
  private imagesUnlisted = false;

  private readonly turns: TurnRestorer;

  private readonly weightVersion: string | null;

  /**
   * From the run's policy section: the weight version recorded on every call, the bytes of the
   * answered calls' images kept, and what goes upstream as earlier turns (turn-restore.ts: restored as
   * generated, and with their token ids for a splicing server).
   */
  constructor(
    policy: Pick<PolicySettings, 'weight_version' | 'token_capture_max_image_mib' | 'token_capture_restore_turns' | 'token_capture_splice'>,
    private readonly maxIds = MAX_ROLLOUT_TOKEN_IDS,
  ) {
    this.weightVersion = policy.weight_version;
    this.imageStore = new ImageStore(policy.token_capture_max_image_mib * 1024 * 1024);
    this.turns = new TurnRestorer({ restore: policy.token_capture_restore_turns, splice: policy.token_capture_splice });
  }

  /** The messages of a call of the conversation as they go upstream (turn-restore.ts). */
  upstreamMessages(messages: readonly ChatMessage[]): ChatMessage[] {
    return this.turns.shape(messages);
  }

  /** A call of the agent's conversation, once it ended. */
  agentCall(f: CallFacts): void {
    const t = f.tokens;
    const fresh = f.answered && f.messages.length > this.seenMessages ? f.messages.slice(this.seenMessages) : [];
    const call: TokenCall = {
      index: f.index, started_at: f.startedAt, latency_ms: f.latencyMs, status: f.status, finish_reason: f.finishReason, answered: f.answered,
      prompt_token_count: t?.promptIds?.length ?? f.promptTokens, generation_token_ids: null, generation_log_probs: null,
      missing: t ? [...t.missing] : ['prompt_token_ids', 'token_ids', 'logprobs'], sampling: f.sampling, weight_version: this.weightVersion,
      images: [],
    };
    if (fresh.length > 0) {
      const seen = imagesOf(fresh, this.imageStore);
      call.images = seen.shas;
      this.imagesUnlisted ||= seen.unlisted;
    }
    this.calls.push(call);
    if (!f.answered) return;
    this.seenMessages = f.messages.length;
    this.turns.answered(t?.message ?? null, t?.promptIds ?? null, t?.generationIds ?? null, t?.logprobs ?? null);
    this.chain(call, t);
    this.answeredBefore = true;
  }

  /** A call that is not the conversation's. */
  otherCall(c: OtherCall): void {
    if (this.others.length < MAX_OTHER_CALLS) this.others.push(c);
    else this.othersDropped++;
  }

  record(): TokenCaptureRecord {
    return {
      calls: [...this.calls].sort((a, b) => a.index - b.index),
      other_calls: [...this.others],
      other_calls_dropped: this.othersDropped,
      chain: { contiguous: this.breaks.length === 0, breaks: [...this.breaks] },
      over_bounds: this.overBounds,
      images: this.imageStore.images,
      images_over_budget: this.imagesUnlisted || this.imageStore.overBudget || this.imageStore.dropped > 0,
    };
  }

  private keep(n: number): boolean {
    if (this.overBounds || this.kept + n > this.maxIds) {
      this.overBounds = true;
      return false;
    }
    this.kept += n;
    return true;
  }

  /** Check the call against the chain and keep what it adds. */
  private chain(call: TokenCall, t: TokenFields | null): void {
    const prompt = t?.promptIds ?? null;
    const generation = t?.generationIds ?? null;
    const tip = this.tip;
    this.tip = null;
    if (!prompt) {
      this.breaks.push({ call: call.index, token: null, why: 'the policy server returned no prompt token ids for this call' });
      return;
    }
    if (this.answeredBefore && tip === null) this.breaks.push({ call: call.index, token: null, why: 'the previous answered call has no token ids to extend' });
    const extendsTip = tip !== null && prompt.length >= tip.length && firstDifference(prompt, tip) === tip.length;
    if (tip !== null && !extendsTip) {
      const at = firstDifference(prompt, tip);
      const why = at === prompt.length
        ? `its prompt (${prompt.length} tokens) is shorter than the previous call's prompt + generation (${tip.length} tokens)`
        : `its prompt differs from the previous call's prompt + generation at token ${at} (expected ${tip[at]}, got ${prompt[at]})`;
      this.breaks.push({ call: call.index, token: at, why });
    }
    if (extendsTip) {
      const inserted = prompt.slice(tip.length);
      if (this.keep(inserted.length)) call.inserted_token_ids = inserted;
    } else if (this.keep(prompt.length)) call.prompt_token_ids = [...prompt];
    if (generation && this.keep(generation.length)) {
      call.generation_token_ids = [...generation];
      call.generation_log_probs = t?.logprobs ? [...t.logprobs] : null;
    }
    this.tip = generation ? [...prompt, ...generation] : null;
  }
}
