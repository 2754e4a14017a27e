/**
 * Writes the records kept beside a rollout's row on the results host, from what Redis holds of them
 * (the sandbox-worker and the judge-worker left them there): its transcript (with the judge's part
 * merged in) as `<stem>_transcripts/<rollout>.json`, its trajectory (token capture, with the row's
 * reward) as `<stem>_trajectories/<rollout>.json`, and every image either names once as
 * `<stem>_transcripts/images/<sha256>.<ext>`. A rejudged row rewrites the reward of a trajectory
 * already written. What cannot be read or written never holds the row back: it is committed without
 * that record, and the log says so. The parts in Redis are removed once the row is committed.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeAtomic, writeRecordImages } from './record-files.ts';
import { errorMessage } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Row } from '../../shared/records/rows.ts';
import type { RunStore } from '../../shared/stores/run-store.ts';
import { decodeTranscript } from '../../shared/records/transcript-codec.ts';
import { transcriptRelPath, TranscriptRecordSchema, type TranscriptRecord } from '../../shared/records/transcript.ts';
import { decodeTrajectory } from '../../shared/records/trajectory-codec.ts';
import { TrajectorySchema, trajectoryRelPath, type Trajectory } from '../../shared/records/trajectory.ts';

type Store = Pick<RunStore, 'getTranscriptParts' | 'deleteTranscript' | 'getBlob'>;
type Parts = Awaited<ReturnType<Store['getTranscriptParts']>>;

/** What a row's records became: the row naming the files that exist, whether Redis still holds parts of them, and the records written. */
export interface AttachedRecords {
  row: Row;
  pending: boolean;
  transcript: TranscriptRecord | null;
  trajectory: Trajectory | null;
}

export class RecordWriter {
  private readonly dir: string;

  constructor(readonly jsonlPath: string, private readonly store: Store, private readonly logger: Logger) {
    this.dir = path.dirname(jsonlPath);
  }

  /** Write what Redis holds of the rollout's records; the row gains `transcript` and `trajectory` for the files that exist. */
  async attach(row: Row): Promise<AttachedRecords> {
    const parts = await this.store.getTranscriptParts(row.run_id, row.rollout_id);
    const transcript = await this.guarded(row, 'transcript', () => this.writeTranscript(row, parts));
    const trajectory = await this.guarded(row, 'trajectory', () => this.writeTrajectory(row, parts));
    const transcriptRel = transcriptRelPath(this.jsonlPath, row.rollout_id);
    const trajectoryRel = trajectoryRelPath(this.jsonlPath, row.rollout_id);
    let out: Row = transcript === 'failed' ? { ...row, transcript: null } : row;
    if (transcript !== 'failed' && existsSync(path.join(this.dir, transcriptRel))) out = { ...out, transcript: transcriptRel };
    if (trajectory !== 'failed' && existsSync(path.join(this.dir, trajectoryRel))) out = { ...out, trajectory: trajectoryRel };
    return {
      row: out,
      pending: parts.record !== null || parts.judge !== null || parts.trajectory !== null,
      transcript: transcript === 'failed' ? null : transcript,
      trajectory: trajectory === 'failed' ? null : trajectory,
    };
  }

  /** After the row is committed: the parts in Redis are no longer needed. */
  async done(row: Row): Promise<void> {
    await this.store.deleteTranscript(row.run_id, row.rollout_id);
  }

  /** One record's writing: a failure is logged, and the row goes on without that record. */
  private async guarded<R>(row: Row, what: 'transcript' | 'trajectory', write: () => Promise<R | null>): Promise<R | null | 'failed'> {
    try {
      return await write();
    } catch (err) {
      this.logger.error({ rollout_id: row.rollout_id, err: errorMessage(err) }, `the ${what} of this rollout could not be written; its row is kept without it`);
      return 'failed';
    }
  }

  private async writeTranscript(row: Row, parts: Parts): Promise<TranscriptRecord | null> {
    const file = path.join(this.dir, transcriptRelPath(this.jsonlPath, row.rollout_id));
    const judge = this.judgePart(parts.judge);
    let record: TranscriptRecord | null = null;
    if (parts.record) record = this.decoded(row, 'transcript', () => decodeTranscript(parts.record!));
    else if (judge !== undefined && existsSync(file)) record = TranscriptRecordSchema.parse(JSON.parse(await readFile(file, 'utf8')));
    if (!record) return null;
    if (judge !== undefined) record.judge = judge;
    const puzzle = record.task.image_sha256;
    await writeRecordImages({ jsonlPath: this.jsonlPath, rolloutId: record.rollout_id, imageMimes: record.image_mimes, images: parts.images, fallback: (sha) => (sha === puzzle ? this.store.getBlob(sha).catch(() => null) : Promise.resolve(null)), waiting: 'transcript' });
    await writeAtomic(file, `${JSON.stringify(record, null, 1)}\n`, 'transcript');
    return record;
  }

  private async writeTrajectory(row: Row, parts: Parts): Promise<Trajectory | null> {
    const file = path.join(this.dir, trajectoryRelPath(this.jsonlPath, row.rollout_id));
    let record: Trajectory | null = null;
    if (parts.trajectory) {
      record = this.decoded(row, 'trajectory', () => decodeTrajectory(parts.trajectory!));
      if (record) await writeRecordImages({ jsonlPath: this.jsonlPath, rolloutId: record.rollout_id, imageMimes: record.image_mimes, images: parts.images, fallback: (sha) => this.store.getBlob(sha).catch(() => null), waiting: 'trajectory' });
    } else if (existsSync(file)) {
      // A rejudged row: the file already written gets the new reward.
      const parsed = TrajectorySchema.safeParse(JSON.parse(await readFile(file, 'utf8')));
      if (parsed.success && parsed.data.reward !== row.reward) record = parsed.data;
    }
    if (!record) return null;
    const rewarded = { ...record, reward: row.reward };
    await writeAtomic(file, `${JSON.stringify(rewarded)}\n`, 'trajectory');
    return rewarded;
  }

  /** A record Redis holds, decoded; one that does not decode (damaged, or a gzip bomb) is dropped and logged. */
  private decoded<R>(row: Row, what: 'transcript' | 'trajectory', decode: () => R): R | null {
    try {
      return decode();
    } catch (err) {
      this.logger.warn({ rollout_id: row.rollout_id, err: (err as Error).message }, `${what} dropped`);
      return null;
    }
  }

  private judgePart(raw: string | null): TranscriptRecord['judge'] | undefined {
    if (raw === null) return undefined;
    const parsed = TranscriptRecordSchema.shape.judge.safeParse(JSON.parse(raw));
    if (parsed.success) return parsed.data;
    this.logger.warn('the judge part of a transcript is malformed; kept without it');
    return undefined;
  }
}
