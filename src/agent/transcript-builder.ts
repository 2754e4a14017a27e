/**
 * The rollout's transcript record, built from what the policy gateway saw: one turn per forwarded
 * call, each tool call of a turn joined with the result OpenCode sent back in the next call (and the
 * images that came with it), the images shown outside tool results, and the outcome. Pure.
 */
import type { RolloutRequest } from '../shared/ports/agent.ts';
import { TRANSCRIPT_VERSION, type TranscriptRecord, type TranscriptTurn } from '../shared/records/transcript.ts';
import type { GatewayCall, StoredImage } from '../gateway/index.ts';

export interface TranscriptInput {
  request: RolloutRequest;
  policyModel: string;
  startedAt: string;
  wallS: number;
  calls: readonly GatewayCall[];
  images: ReadonlyMap<string, StoredImage>;
  outcome: TranscriptRecord['outcome'];
  agent: TranscriptRecord['agent'];
  /** What the gateway cut to keep the rollout within its bounds (notes). */
  cut?: readonly string[];
}

export interface BuiltTranscript {
  record: TranscriptRecord;
  /** Image bytes by SHA-256 (those kept within the gateway's budget, and the puzzle). */
  images: Map<string, { mime: string; bytes: Buffer }>;
}

function turnOf(call: GatewayCall): TranscriptTurn {
  const r = call.response;
  return {
    index: call.index,
    started_at: call.startedAt,
    latency_ms: call.latencyMs,
    status: call.status,
    error: call.upstreamError ?? (call.status !== null && call.status >= 400 ? (r.errorMessage ?? `HTTP ${call.status}`) : null),
    finish_reason: r.finishReason,
    input_tokens: r.promptTokens,
    output_tokens: r.completionTokens,
    shown_images: call.request.shownImages,
    text: r.text,
    reasoning: r.reasoning,
    tool_calls: r.toolCalls.map((t) => ({ id: t.id, name: t.name, arguments: t.arguments, output: null, images: [] })),
  };
}

/** Join each tool call with its result, found in the requests that follow it. */
function joinToolResults(turns: TranscriptTurn[], calls: readonly GatewayCall[]): void {
  const byId = new Map<string, TranscriptTurn['tool_calls'][number]>();
  for (let i = 0; i < turns.length; i++) {
    for (const result of calls[i].request.toolResults) {
      const call = byId.get(result.toolCallId);
      if (!call || call.output !== null) continue;
      call.output = result.output;
      call.images = result.images;
    }
    for (const t of turns[i].tool_calls) if (t.id) byId.set(t.id, t);
  }
}

export function buildTranscript(input: TranscriptInput): BuiltTranscript {
  const { request, calls } = input;
  const turns = calls.map(turnOf);
  joinToolResults(turns, calls);
  const images = new Map<string, { mime: string; bytes: Buffer }>();
  const mimes: Record<string, string> = { [request.image.sha256]: request.image.mime };
  images.set(request.image.sha256, { mime: request.image.mime, bytes: request.image.bytes });
  for (const img of request.moreImages ?? []) {
    mimes[img.sha256] = img.mime;
    images.set(img.sha256, { mime: img.mime, bytes: img.bytes });
  }
  for (const [sha, img] of input.images) {
    mimes[sha] = img.mime;
    if (img.bytes) images.set(sha, { mime: img.mime, bytes: img.bytes });
  }
  const truncated: string[] = [];
  if ([...input.images.values()].some((i) => i.bytes === null)) truncated.push('images over the byte budget are kept by hash only');
  if (calls.some((c) => c.response.truncated)) truncated.push('long answers were cut');
  truncated.push(...(input.cut ?? []));
  const task = request.task;
  const record: TranscriptRecord = {
    transcript_version: TRANSCRIPT_VERSION,
    run_id: request.runId,
    rollout_id: request.rolloutId,
    task_id: task.task_id,
    repeat: request.repeat,
    attempt: request.attempt ?? 1,
    benchmark: task.benchmark,
    policy_model: input.policyModel,
    task: {
      prompt: task.prompt, question: task.question, gold: task.gold, ans_type: task.ans_type, type: task.type,
      subtype: task.subtype, options: task.options, image_sha256: task.image_sha256,
    },
    started_at: input.startedAt,
    wall_s: input.wallS,
    turns,
    outcome: input.outcome,
    judge: null,
    agent: input.agent,
    image_mimes: mimes,
    truncated,
  };
  return { record, images };
}
