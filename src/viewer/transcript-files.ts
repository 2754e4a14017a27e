/**
 * Reading a run's transcripts folder safely (`<stem>_transcripts/` beside the JSONL):
 * - a transcript is read only when the row's `transcript` path names a `.json` file directly in
 *   that folder, and the file (after symlinks) is still there;
 * - an image is read only by its SHA-256, checked as 64 hex digits, under a fixed set of file names
 *   in `<stem>_transcripts/images/`.
 * No text from a URL or a row is ever joined into a path unchecked. Every `ViewerSource` that reads
 * output files (the file source, the dashboard's Redis source) reads them through `outputFiles`.
 */
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Row } from '../shared/records/rows.ts';
import { TranscriptRecordSchema, transcriptDirFor } from '../shared/records/transcript.ts';
import { SHA256_PATTERN, type TokenCaptureView, type TranscriptLookup } from './source.ts';
import { TrajectorySchema } from '../shared/records/trajectory.ts';

/** A transcript file larger than this is not read (the writer bounds records far below it). */
export const MAX_TRANSCRIPT_BYTES = 64 * 1024 * 1024;

/** The file names an image may have, in the order they are tried (see `imageFileName`). */
const IMAGE_EXTENSIONS = ['png', 'jpg', 'gif', 'webp'] as const;

/** True when `file`, after symlinks, is a regular file directly inside `dir` (after symlinks). */
function staysIn(dir: string, file: string): boolean {
  try {
    return path.dirname(realpathSync(file)) === realpathSync(dir) && statSync(file).isFile();
  } catch {
    return false;
  }
}

function parseRecord(file: string, row: Row): TranscriptLookup {
  const unreadable = (problem: string): TranscriptLookup => ({ status: 'unreadable', looked_for: file, problem });
  if (statSync(file).size > MAX_TRANSCRIPT_BYTES) return unreadable(`larger than ${MAX_TRANSCRIPT_BYTES} bytes; not read`);
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    return unreadable(`not readable as JSON (${(err as Error).message})`);
  }
  const parsed = TranscriptRecordSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return unreadable(`not a transcript record (${issue.path.join('.') || 'the file'}: ${issue.message})`);
  }
  const record = parsed.data;
  if (record.run_id !== row.run_id || record.rollout_id !== row.rollout_id) {
    return unreadable(`holds rollout ${record.rollout_id} of run ${record.run_id}, not this rollout`);
  }
  return { status: 'found', record };
}

/** The transcript record a row points to, read from the transcripts folder beside `jsonlPath`. */
function readTranscriptFile(jsonlPath: string, row: Row): TranscriptLookup {
  if (row.transcript === null) return { status: 'not_kept' };
  const dir = transcriptDirFor(path.resolve(jsonlPath));
  const file = path.resolve(path.dirname(path.resolve(jsonlPath)), row.transcript);
  if (path.dirname(file) !== dir || !file.endsWith('.json')) {
    return { status: 'unreadable', looked_for: row.transcript, problem: `not a .json file directly in ${dir} (was the JSONL renamed?); not read` };
  }
  if (!existsSync(file)) return { status: 'missing', looked_for: file };
  if (!staysIn(dir, file)) return { status: 'unreadable', looked_for: file, problem: `leads outside ${dir} (a symlink?); not read` };
  return parseRecord(file, row);
}

/** A trajectory file larger than this is not read by the viewer. */
export const MAX_TRAJECTORY_VIEW_BYTES = 64 * 1024 * 1024;

/** The summary of the trajectory a row names, when it is a `.json` directly in `<stem>_trajectories/` of this rollout; else null. */
function readTrajectoryView(jsonlPath: string, row: Row): TokenCaptureView | null {
  if (row.trajectory === null) return null;
  const dir = path.join(path.dirname(jsonlPath), `${path.basename(jsonlPath).replace(/\.jsonl$/, '')}_trajectories`);
  const file = path.resolve(path.dirname(jsonlPath), row.trajectory);
  if (path.dirname(file) !== dir || !file.endsWith('.json') || !existsSync(file) || !staysIn(dir, file) || statSync(file).size > MAX_TRAJECTORY_VIEW_BYTES) return null;
  let parsed;
  try {
    parsed = TrajectorySchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
  } catch {
    return null;
  }
  if (!parsed.success || parsed.data.run_id !== row.run_id || parsed.data.rollout_id !== row.rollout_id) return null;
  const t = parsed.data;
  return {
    mask_sample: t.mask_sample, mask_reason: t.mask_reason, mask_detail: t.mask_detail, weight_version: t.weight_version, reward: t.reward,
    chain: t.chain, calls: t.calls.length, other_calls: t.other_calls.length + t.other_calls_dropped, flat_calls: t.flat_calls,
    response_tokens: t.response_ids.length, turns: t.turns,
  };
}

/** The bytes of the image `sha256` in `imagesDir`; null when the name is not a SHA-256 or no file holds it. */
function readImageFile(imagesDir: string, sha256: string): Uint8Array | null {
  if (!SHA256_PATTERN.test(sha256)) return null;
  for (const ext of IMAGE_EXTENSIONS) {
    const file = path.join(imagesDir, `${sha256}.${ext}`);
    if (existsSync(file) && staysIn(imagesDir, file)) return new Uint8Array(readFileSync(file));
  }
  return null;
}

/** What the viewer reads beside one output JSONL, through the guards above. */
export interface OutputFiles {
  /** The output JSONL, absolute. */
  readonly jsonl: string;
  /** The transcript record `row` names, or why there is none to show. */
  transcript(row: Row): TranscriptLookup;
  /** The summary of the trajectory `row` names (token capture); null when none is held here. */
  tokenCapture(row: Row): TokenCaptureView | null;
  /** An image of `<stem>_transcripts/images/` by SHA-256; null when the name is not one or no file holds it. */
  image(sha256: string): Uint8Array | null;
}

/** The transcripts and images of the run output `jsonlPath` (the files need not exist yet). */
export function outputFiles(jsonlPath: string): OutputFiles {
  const jsonl = path.resolve(jsonlPath);
  const imagesDir = path.join(transcriptDirFor(jsonl), 'images');
  return { jsonl, transcript: (row) => readTranscriptFile(jsonl, row), tokenCapture: (row) => readTrajectoryView(jsonl, row), image: (sha256) => readImageFile(imagesDir, sha256) };
}
