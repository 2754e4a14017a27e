/**
 * Writes each rollout's trajectory beside its run's JSONL on the results host: the record, with the
 * row's reward, as `<stem>_trajectories/<rollout>.json`, and the images it names once each in the
 * transcripts' image folder (`<stem>_transcripts/images/<sha256>.<ext>`). The record comes from
 * Redis (the transcript's key), where the sandbox-worker left it once the rollout finished; it is
 * removed with the transcript's parts once the row is committed. A rejudged row rewrites the reward
 * of the file already written.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InfraError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Row } from '../../shared/rows.ts';
import type { RunStore } from '../../shared/run-store.ts';
import { imageFileName, transcriptRelPath } from '../../shared/transcript.ts';
import { decodeTrajectory } from '../../shared/trajectory-codec.ts';
import { TrajectorySchema, trajectoryRelPath, type Trajectory } from '../../shared/trajectory.ts';

type Store = Pick<RunStore, 'getTranscriptParts' | 'getBlob'>;

async function writeAtomic(file: string, content: string | Buffer): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}`;
  try {
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(tmp, content);
    await rename(tmp, file);
  } catch (err) {
    throw new InfraError(`cannot write ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): make its folder writable or free disk space; the trajectory waits in Redis`, { cause: err });
  }
}

export class TrajectoryWriter {
  private readonly dir: string;

  constructor(private readonly jsonlPath: string, private readonly store: Store, private readonly logger: Logger) {
    this.dir = path.dirname(jsonlPath);
  }

  /** Write what Redis holds of the rollout's trajectory; the row gains `trajectory` when a file exists. */
  async attach(row: Row): Promise<{ row: Row; pending: boolean }> {
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
      if (record) await this.writeImages(record, parts.images);
    } else if (existsSync(file)) {
      const parsed = TrajectorySchema.safeParse(JSON.parse(await readFile(file, 'utf8')));
      if (parsed.success && parsed.data.reward !== row.reward) record = parsed.data;
    }
    if (record) await writeAtomic(file, `${JSON.stringify({ ...record, reward: row.reward })}\n`);
    return { row: existsSync(file) ? { ...row, trajectory: rel } : row, pending: parts.trajectory !== null };
  }

  private async writeImages(record: Trajectory, images: ReadonlyMap<string, Buffer>): Promise<void> {
    const folder = path.join(this.dir, path.dirname(transcriptRelPath(this.jsonlPath, record.rollout_id)), 'images');
    for (const [sha, mime] of Object.entries(record.image_mimes)) {
      if (!/^[0-9a-f]{64}$/.test(sha)) continue;
      const file = path.join(folder, imageFileName(sha, mime));
      if (existsSync(file)) continue;
      const bytes = images.get(sha) ?? (await this.store.getBlob(sha).catch(() => null));
      if (bytes) await writeAtomic(file, bytes);
    }
  }
}
