/**
 * Writes each rollout's transcript beside its run's JSONL on the results host: the record (with the
 * judge's part merged in) as `<stem>_transcripts/<rollout>.json`, and every image it references once
 * as `<stem>_transcripts/images/<sha256>.<ext>`. The parts come from Redis, where the sandbox-worker
 * and the judge-worker left them; they are removed once the row that names the file is committed.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeAtomic, writeRecordImages } from './record-files.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Row } from '../../shared/records/rows.ts';
import type { RunStore } from '../../shared/stores/run-store.ts';
import { decodeTranscript } from '../../shared/records/transcript-codec.ts';
import { transcriptRelPath, TranscriptRecordSchema, type TranscriptRecord } from '../../shared/records/transcript.ts';

type Store = Pick<RunStore, 'getTranscriptParts' | 'deleteTranscript' | 'getBlob'>;

function judgePart(raw: string | null, logger: Logger): TranscriptRecord['judge'] | undefined {
  if (raw === null) return undefined;
  const parsed = TranscriptRecordSchema.shape.judge.safeParse(JSON.parse(raw));
  if (parsed.success) return parsed.data;
  logger.warn('the judge part of a transcript is malformed; kept without it');
  return undefined;
}

export class TranscriptWriter {
  private readonly dir: string;

  constructor(private readonly jsonlPath: string, private readonly store: Store, private readonly logger: Logger) {
    this.dir = path.dirname(jsonlPath);
  }

  /** Write what Redis holds of the rollout's transcript; the row gains `transcript` when a file exists (`record`: the one written). */
  async attach(row: Row): Promise<{ row: Row; pending: boolean; record: TranscriptRecord | null }> {
    const rel = transcriptRelPath(this.jsonlPath, row.rollout_id);
    const file = path.join(this.dir, rel);
    const parts = await this.store.getTranscriptParts(row.run_id, row.rollout_id);
    const judge = judgePart(parts.judge, this.logger);
    let record: TranscriptRecord | null = null;
    if (parts.record) {
      try {
        record = decodeTranscript(parts.record);
      } catch (err) {
        this.logger.warn({ rollout_id: row.rollout_id, err: (err as Error).message }, 'transcript dropped');
      }
    } else if (judge !== undefined && existsSync(file)) {
      record = TranscriptRecordSchema.parse(JSON.parse(await readFile(file, 'utf8')));
    }
    if (record) {
      if (judge !== undefined) record.judge = judge;
      await writeRecordImages({ jsonlPath: this.jsonlPath, rolloutId: record.rollout_id, imageMimes: record.image_mimes, images: parts.images, fallback: (sha) => (sha === record.task.image_sha256 ? this.store.getBlob(sha).catch(() => null) : Promise.resolve(null)), waiting: 'transcript' });
      await writeAtomic(file, `${JSON.stringify(record, null, 1)}\n`, 'transcript');
    }
    const pending = parts.record !== null || parts.judge !== null;
    return { row: existsSync(file) ? { ...row, transcript: rel } : row, pending, record };
  }

  /** After the row is committed: the parts in Redis are no longer needed. */
  async done(row: Row): Promise<void> {
    await this.store.deleteTranscript(row.run_id, row.rollout_id);
  }

}
