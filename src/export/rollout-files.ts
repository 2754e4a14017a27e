/**
 * A rollout's files beside its run's JSONL, read for export: its transcript record
 * (`<stem>_transcripts/<rollout>.json`), its trajectory (`<stem>_trajectories/<rollout>.json`) and
 * images of `<stem>_transcripts/images/` by SHA-256. Every file is attacker-influenced (the model
 * wrote much of it): a record is read only when the row's path names a `.json` directly in its
 * folder and stays there after symlinks, within a size bound, parsed strictly, and of this rollout;
 * an image only by a checked SHA-256 under the fixed file names. Each read gives the value or the
 * problem in words, never an exception.
 */
import { readFileSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import type { Row } from '../shared/records/rows.ts';
import { MAX_TRANSCRIPT_JSON_BYTES } from '../shared/records/transcript-codec.ts';
import { MAX_TRAJECTORY_JSON_BYTES } from '../shared/records/trajectory-codec.ts';
import { TranscriptRecordSchema, transcriptDirFor, type TranscriptRecord } from '../shared/records/transcript.ts';
import { TrajectorySchema, type Trajectory } from '../shared/records/trajectory.ts';

/** An image file larger than this is not read (the sandbox-worker keeps images far below it). */
export const MAX_IMAGE_FILE_BYTES = 64 * 1024 * 1024;

const SHA256 = /^[0-9a-f]{64}$/;
const IMAGE_EXTENSIONS = ['png', 'jpg', 'gif', 'webp'] as const;

/** A path or id for a message, cut to a readable length (a hostile row may name a megabyte of path). */
const short = (s: string) => (s.length > 300 ? `${s.slice(0, 300)}…` : s);

export type Read<T> = { ok: true; value: T } | { ok: false; problem: string };

/** The realpath of `file` when it is a regular file directly inside `dir` (after symlinks) of at most `maxBytes`. */
function checkedFile(dir: string, file: string, maxBytes: number): Read<string> {
  const named = short(file);
  let real: string;
  let size: number;
  try {
    real = realpathSync(file);
    const st = statSync(real);
    if (!st.isFile()) return { ok: false, problem: `${named} is not a file` };
    size = st.size;
    if (path.dirname(real) !== realpathSync(dir)) return { ok: false, problem: `${named} leads outside ${dir} (a symlink?); not read` };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { ok: false, problem: code === 'ENOENT' ? `${named} is missing` : `${named} cannot be read (${code ?? (err as Error).message})` };
  }
  if (size > maxBytes) return { ok: false, problem: `${named} is larger than ${maxBytes} bytes; not read` };
  return { ok: true, value: real };
}

function readRecord<S extends z.ZodTypeAny>(jsonl: string, rel: string, dir: string, maxBytes: number, schema: S, what: string, row: Row): Read<z.infer<S>> {
  const file = path.resolve(path.dirname(jsonl), rel);
  if (path.dirname(file) !== dir || !file.endsWith('.json')) return { ok: false, problem: `its ${what} path ${JSON.stringify(short(rel))} is not a .json file directly in ${dir} (was the JSONL renamed?)` };
  const checked = checkedFile(dir, file, maxBytes);
  if (!checked.ok) return checked;
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(checked.value, 'utf8'));
  } catch (err) {
    return { ok: false, problem: `its ${what} ${short(file)} is not JSON (${(err as Error).message.slice(0, 200)})` };
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, problem: `its ${what} ${short(file)} is malformed (${issue.path.join('.') || 'the file'}: ${issue.message})` };
  }
  const record = parsed.data as { run_id: string; rollout_id: string };
  if (record.run_id !== row.run_id || record.rollout_id !== row.rollout_id) {
    return { ok: false, problem: `its ${what} ${short(file)} holds rollout ${short(record.rollout_id)} of run ${short(record.run_id)}, not this one` };
  }
  return { ok: true, value: parsed.data };
}

/** The files beside one output JSONL. */
export class RolloutFiles {
  readonly jsonl: string;
  private readonly transcripts: string;
  private readonly trajectories: string;
  private readonly images: string;

  constructor(jsonlPath: string) {
    this.jsonl = path.resolve(jsonlPath);
    this.transcripts = transcriptDirFor(this.jsonl);
    this.trajectories = path.join(path.dirname(this.jsonl), `${path.basename(this.jsonl).replace(/\.jsonl$/, '')}_trajectories`);
    this.images = path.join(this.transcripts, 'images');
  }

  /** The row's transcript record (the row must name one). */
  transcript(row: Row & { transcript: string }): Read<TranscriptRecord> {
    return readRecord(this.jsonl, row.transcript, this.transcripts, MAX_TRANSCRIPT_JSON_BYTES, TranscriptRecordSchema, 'transcript', row);
  }

  /** The row's trajectory (the row must name one). */
  trajectory(row: Row & { trajectory: string }): Read<Trajectory> {
    return readRecord(this.jsonl, row.trajectory, this.trajectories, MAX_TRAJECTORY_JSON_BYTES, TrajectorySchema, 'trajectory', row);
  }

  /** The absolute path of the image `sha256`, or null when the name is not a SHA-256 or no file of the folder holds it. */
  imagePath(sha256: string): string | null {
    if (!SHA256.test(sha256)) return null;
    for (const ext of IMAGE_EXTENSIONS) {
      const found = checkedFile(this.images, path.join(this.images, `${sha256}.${ext}`), MAX_IMAGE_FILE_BYTES);
      if (found.ok) return found.value;
    }
    return null;
  }

  /** The bytes of the image `sha256`. */
  image(sha256: string): Read<Buffer> {
    const file = this.imagePath(sha256);
    if (file === null) return { ok: false, problem: `image ${sha256.slice(0, 64)} has no readable file in ${this.images} (at most ${MAX_IMAGE_FILE_BYTES} bytes)` };
    try {
      return { ok: true, value: readFileSync(file) };
    } catch (err) {
      return { ok: false, problem: `image ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})` };
    }
  }
}
