/**
 * The files a rollout's records leave beside its run's JSONL (transcripts, trajectories): each
 * written atomically, and the images a record names written once each into the transcripts' image
 * folder (`<stem>_transcripts/images/<sha256>.<ext>`).
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InfraError } from '../../shared/errors.ts';
import { imageFileName, transcriptRelPath } from '../../shared/records/transcript.ts';

/**
 * Write `file` through a temporary beside it, of its own (two commits of one process may write the
 * same image at once); `waiting` names what stays in Redis when that fails (its error says so).
 */
export async function writeAtomic(file: string, content: string | Buffer, waiting: 'transcript' | 'trajectory'): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`;
  try {
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(tmp, content);
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => {});
    throw new InfraError(`cannot write ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): make its folder writable or free disk space; the ${waiting} waits in Redis`, { cause: err });
  }
}

export interface RecordImages {
  /** The run's JSONL (the image folder is its transcripts' one). */
  jsonlPath: string;
  rolloutId: string;
  /** The record's images by SHA-256, with their types; a key that is not a SHA-256 is skipped. */
  imageMimes: Readonly<Record<string, string>>;
  /** The image bytes that came with the record. */
  images: ReadonlyMap<string, Buffer>;
  /** Bytes of an image that did not come with it (a blob of the run), or null. */
  fallback(sha: string): Promise<Buffer | null>;
  waiting: 'transcript' | 'trajectory';
}

/** Write each image the record names that is not on disk yet. */
export async function writeRecordImages(o: RecordImages): Promise<void> {
  const folder = path.join(path.dirname(o.jsonlPath), path.dirname(transcriptRelPath(o.jsonlPath, o.rolloutId)), 'images');
  for (const [sha, mime] of Object.entries(o.imageMimes)) {
    if (!/^[0-9a-f]{64}$/.test(sha)) continue;
    const file = path.join(folder, imageFileName(sha, mime));
    if (existsSync(file)) continue;
    const bytes = o.images.get(sha) ?? (await o.fallback(sha));
    if (bytes) await writeAtomic(file, bytes, o.waiting);
  }
}
