/**
 * The transcript record of one rollout: what the model was asked and shown, every policy call in
 * order (its text, its tool calls with their output, the images it was shown), the outcome and the
 * judge's verdict. The sandbox-worker builds it from what its policy gateway saw (the source of
 * truth: bytes the sandbox cannot forge); it travels through Redis to the results consumer, which
 * writes it beside the output JSONL:
 *
 *   <stem>.jsonl                                  one row per rollout; `transcript` names the file below
 *   <stem>_transcripts/<rollout file stem>.json   this record (images by SHA-256 only)
 *   <stem>_transcripts/images/<sha256>.<ext>      every image once, by SHA-256
 *
 * Everything in it that the model wrote (text, tool arguments, tool output) is untrusted: a viewer
 * must render it as text, never as HTML.
 */
import path from 'node:path';
import { z } from 'zod';
import { VERDICTS } from '../scoring/verdict.ts';
import { RolloutOutcomeSchema } from './rollout-outcome.ts';

export const TRANSCRIPT_VERSION = 1;

/** One tool call the model made in a turn, with the result OpenCode sent back in the next call. */
export const ToolCallSchema = z.object({
  id: z.string(),
  name: z.string(),
  /** The arguments as the model wrote them (a JSON string, possibly invalid). */
  arguments: z.string(),
  /** The tool's output as the model saw it; null when the session ended before the next call. */
  output: z.string().nullable(),
  /** SHA-256 of each image returned with the result (e.g. a `read` of a crop the model made). */
  images: z.array(z.string()).default([]),
});
export type TranscriptToolCall = z.infer<typeof ToolCallSchema>;

/** One policy call: the model's turn. */
export const TurnSchema = z.object({
  index: z.number().int().min(0),
  started_at: z.string(),
  latency_ms: z.number().min(0),
  /** HTTP status of the policy server; null when it was not reached or never answered. */
  status: z.number().int().nullable(),
  /** Why the call failed (unreachable, timeout, an error body), or null. */
  error: z.string().nullable(),
  finish_reason: z.string().nullable(),
  input_tokens: z.number().int().nullable(),
  output_tokens: z.number().int().nullable(),
  /** Images the model was shown for the first time in this call's request (the puzzle in turn 0). */
  shown_images: z.array(z.string()).default([]),
  /** The assistant text of the response (assembled from the stream). */
  text: z.string(),
  /** Reasoning text, when the server streams it separately. */
  reasoning: z.string().nullable().default(null),
  tool_calls: z.array(ToolCallSchema).default([]),
});
export type TranscriptTurn = z.infer<typeof TurnSchema>;

export const TranscriptRecordSchema = z.object({
  transcript_version: z.literal(TRANSCRIPT_VERSION),
  run_id: z.string(),
  rollout_id: z.string(),
  task_id: z.string(),
  repeat: z.number().int().min(0),
  /** 1 for the first attempt of this rollout. */
  attempt: z.number().int().min(1),
  benchmark: z.string(),
  policy_model: z.string(),
  task: z.object({
    prompt: z.string(),
    question: z.string(),
    gold: z.string(),
    ans_type: z.enum(['choice', 'blank']),
    type: z.string(),
    subtype: z.string(),
    options: z.array(z.string()).default([]),
    image_sha256: z.string(),
  }),
  started_at: z.string(),
  wall_s: z.number().min(0),
  turns: z.array(TurnSchema),
  /** The rollout's outcome (rollout-outcome.ts), as its row and its judge job have it (no stop reason: its infrastructure failed). */
  outcome: RolloutOutcomeSchema.extend({ stop_reason: RolloutOutcomeSchema.shape.stop_reason.nullable() }),
  /** The judge's grading; null when the rollout was not judged (no answer, masked). */
  judge: z
    .object({
      model: z.string(),
      verdict: z.enum(VERDICTS).nullable(),
      reason: z.string().nullable(),
      /** The exact messages the judge was sent. */
      prompt: z.object({ system: z.string(), user: z.string() }),
      cached: z.boolean().default(false),
    })
    .nullable()
    .default(null),
  /** OpenCode's own account (exit status, its stderr tail): untrusted, for reading only. */
  agent: z
    .object({
      exit_code: z.number().int().nullable(),
      signal: z.string().nullable(),
      timed_out: z.boolean(),
      stderr_tail: z.string(),
    })
    .nullable()
    .default(null),
  /** MIME type of every image referenced above, by SHA-256. */
  image_mimes: z.record(z.string(), z.string()).default({}),
  /** What was dropped to keep the record within its size bound (empty when nothing). */
  truncated: z.array(z.string()).default([]),
});
export type TranscriptRecord = z.infer<typeof TranscriptRecordSchema>;

/** A file-name-safe form of a rollout id. */
export function safeFileStem(id: string): string {
  return id.replace(/[^A-Za-z0-9_.-]/g, '_');
}

/** `results/run.jsonl` -> `results/run_transcripts` (absolute when the JSONL path is). */
export function transcriptDirFor(outputJsonl: string): string {
  const stem = path.basename(outputJsonl).replace(/\.jsonl$/, '');
  return path.join(path.dirname(outputJsonl), `${stem}_transcripts`);
}

/** The `transcript` field of a row: the record's path relative to the JSONL's folder. */
export function transcriptRelPath(outputJsonl: string, rolloutId: string): string {
  const stem = path.basename(outputJsonl).replace(/\.jsonl$/, '');
  return `${stem}_transcripts/${safeFileStem(rolloutId)}.json`;
}

/** The file name of an image stored once by SHA-256. */
export function imageFileName(sha256: string, mime: string): string {
  const ext = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/gif': 'gif', 'image/webp': 'webp' }[mime] ?? 'bin';
  return `${sha256}.${ext}`;
}
