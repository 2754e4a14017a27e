/**
 * Where the rollout viewer gets its data. The viewer app (app.ts) only ever talks to a
 * `ViewerSource`: the file source (file-source.ts) reads an output JSONL and the folders beside it;
 * a Redis-backed source can serve the live dashboard through the same app.
 *
 * Contract for every implementation:
 * - ids come from URLs and are untrusted: look runs and rollouts up by id among the rows, and never
 *   turn raw id text into a path or a key pattern;
 * - `null` means "no such run / rollout / image" (the app answers 404); throw only when the store
 *   itself failed (the app answers 500 with the message);
 * - everything a model wrote (transcript text, tool output, extracted answers) is returned as data,
 *   never interpreted: the pages render it as text.
 */
import type { Row } from '../shared/records/rows.ts';
import type { TranscriptRecord } from '../shared/records/transcript.ts';
import type { AggregateMetrics } from '../shared/output/metrics.ts';

/** One run in the run list. */
export interface RunListEntry {
  run_id: string;
  benchmark: string;
  policy_model: string;
  rollouts: number;
  scored: number;
  correct: number;
  /** correct / scored; null when nothing is scored yet. */
  mean_reward: number | null;
  /** The latest `finished_at` among the run's rows (ISO 8601). */
  last_finished_at: string;
}

/** What is known about a run besides its rows. */
export interface RunMeta {
  run_id: string;
  benchmark: string;
  policy_model: string;
  judge_model: string | null;
  /** Repeats of the run (from its metrics file when it has one, else the highest repeat + 1). */
  num_repeats: number;
  /** Where the rows come from, for people (a file path, a Redis prefix). */
  origin: string;
  /** Problems met while reading the run (a line that is not a row, a duplicate rollout), for people. */
  problems: string[];
  /** What the run waits for, for people (jobs queued that no live worker serves); a live source only. */
  notices?: string[];
}

export interface RunData {
  meta: RunMeta;
  /** One row per rollout, in the order the source holds them. */
  rows: Row[];
  metrics: AggregateMetrics;
}

/** The outcome of looking for a rollout's transcript record. */
export type TranscriptLookup =
  | { status: 'found'; record: TranscriptRecord }
  /** The row says no transcript was kept (`transcript: null`). */
  | { status: 'not_kept' }
  /** Not on this host: `looked_for` names the file (or key) that was tried. */
  | { status: 'missing'; looked_for: string }
  /** Present but unusable (unreadable, not a transcript record, another rollout's, outside its folder). */
  | { status: 'unreadable'; looked_for: string; problem: string };

/** What the rollout page shows of a trajectory (token capture): everything but the token arrays. */
export interface TokenCaptureView {
  mask_sample: boolean;
  mask_reason: string | null;
  mask_detail: string | null;
  weight_version: string | null;
  reward: number | null;
  chain: { contiguous: boolean; breaks: Array<{ call: number; token: number | null; why: string }> };
  calls: number;
  other_calls: number;
  flat_calls: number;
  response_tokens: number;
  /** Per answered call: tokens generated, and tokens the environment inserted before it. */
  turns: Array<{ call: number; generated: number; inserted: number }>;
}

export interface RolloutData {
  row: Row;
  transcript: TranscriptLookup;
  /** The trajectory's summary, when the row names one that this host holds; else null (or absent). */
  token_capture?: TokenCaptureView | null;
}

export interface ViewerSource {
  /** The runs the source holds, most recently finished first. */
  runs(): Promise<RunListEntry[]>;
  /** A run's meta, rows and aggregate metrics; null when the source has no such run. */
  run(runId: string): Promise<RunData | null>;
  /** One rollout's row and its transcript; null when the run has no rollout with this id. */
  rollout(runId: string, rolloutId: string): Promise<RolloutData | null>;
  /**
   * The bytes of an image by SHA-256 (64 lowercase hex digits, checked by the caller too); null when
   * not held. The app decides the content type from the bytes and refuses anything but PNG, JPEG,
   * GIF and WebP.
   */
  image(sha256: string): Promise<Uint8Array | null>;
}

/** 64 lowercase hex digits: the only image name the viewer accepts. */
export const SHA256_PATTERN = /^[0-9a-f]{64}$/;
