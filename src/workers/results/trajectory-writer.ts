/**
 * Writes each rollout's trajectory beside its run's JSONL on the results host: the record, with the
 * row's reward, as `<stem>_trajectories/<rollout>.json`, and the images it names once each in the
 * transcripts' image folder (`<stem>_transcripts/images/<sha256>.<ext>`). The record comes from
 * Redis (the transcript's key), where the sandbox-worker left it once the rollout finished; it is
 * removed with the transcript's parts once the row is committed. A rejudged row rewrites the reward
 * of the file already written.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeAtomic, writeRecordImages } from './record-files.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Row } from '../../shared/records/rows.ts';
import type { RunStore } from '../../shared/stores/run-store.ts';
import { decodeTrajectory } from '../../shared/records/trajectory-codec.ts';
import { TrajectorySchema, trajectoryRelPath, type Trajectory } from '../../shared/records/trajectory.ts';

type Store = Pick<RunStore, 'getTranscriptParts' | 'getBlob'>;

export class TrajectoryWriter {
  private readonly dir: string;

  constructor(private readonly jsonlPath: string, private readonly store: Store, private readonly logger: Logger) {
    this.dir = path.dirname(jsonlPath);
  }

  /** Write what Redis holds of the rollout's trajectory; the row gains `trajectory` when a file exists (`record`: the one Redis held). */
  async attach(row: Row): Promise<{ row: Row; pending: boolean; record: Trajectory | null }> {
    const rel = trajectoryRelPath(this.jsonlPath, row.rollout_id);
    const file = path.join(this.dir, rel);
    const parts = await this.store.getTranscriptParts(row.run_id, row.rollout_id);
    let record: Trajectory | null = null;
    if (parts.trajectory) {
      try {
        record = decodeTrajectory(parts.trajectory);
      } catch (err) {
        this.logger.warn({ rollout_id: row.rollout_id, err: (err as Error).message }, 'trajectory dropped');
      }
      if (record) await writeRecordImages({ jsonlPath: this.jsonlPath, rolloutId: record.rollout_id, imageMimes: record.image_mimes, images: parts.images, fallback: (sha) => this.store.getBlob(sha).catch(() => null), waiting: 'trajectory' });
    } else if (existsSync(file)) {
      const parsed = TrajectorySchema.safeParse(JSON.parse(await readFile(file, 'utf8')));
      if (parsed.success && parsed.data.reward !== row.reward) record = parsed.data;
    }
    if (record) await writeAtomic(file, `${JSON.stringify({ ...record, reward: row.reward })}\n`, 'trajectory');
    return { row: existsSync(file) ? { ...row, trajectory: rel } : row, pending: parts.trajectory !== null, record: record ? { ...record, reward: row.reward } : null };
  }

}
