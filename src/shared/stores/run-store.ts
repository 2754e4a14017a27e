/**
 * What a run keeps in Redis besides its jobs: the run record (its settings, no secret), its tasks,
 * the images (once each, by SHA-256, checked when read), the agent outcomes (for rejudging), the rows,
 * and each rollout's transcript until the results host has written it.
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import { fleetKeys, type FleetKeys } from '../redis/keys.ts';
import { PreparedTaskSchema, type PreparedTask } from '../records/task.ts';
import { RolloutOutcomeSchema, type RolloutOutcome } from '../records/rollout-outcome.ts';
import { RowSchema, type Row } from '../records/rows.ts';
import { ConfigError, DataError, InfraError, PoisonJobError } from '../errors.ts';
import { OutputLocationSchema, RunRecordSchema, type OutputLocation, type RunRecord } from './run-record.ts';

export { runSettings } from './run-record.ts';
export type { OutputLocation, RunOrigin, RunRecord, SettingsChange } from './run-record.ts';

/** The parts of a transcript waiting in Redis for the results host. */
export interface TranscriptParts {
  /** The gzipped record (transcript-codec.ts), or null when only the judge's part is there (a rejudge). */
  record: Buffer | null;
  /** The judge's part of the record, as JSON. */
  judge: string | null;
  /** Images the record references, by SHA-256 (the puzzle is a run blob instead). */
  images: Map<string, Buffer>;
  /** The gzipped trajectory (trajectory-codec.ts), with token capture on; null when none waits. */
  trajectory: Buffer | null;
}

/** How long a worker keeps a run record before reading it again (a `vcfleet run-set` reaches it within this). */
export const RUN_RECORD_CACHE_MS = 5000;

export interface RunStoreOptions {
  /**
   * Keep what never changes once produced (tasks, images by SHA-256) in this process, so a worker
   * reads each once instead of once per job; run records for RUN_RECORD_CACHE_MS (`run-set` changes
   * them). Images up to `cacheImageBytes` (default 256 MiB) are kept, least recently used first out.
   */
  cache?: boolean;
  cacheImageBytes?: number;
}

export class RunStore {
  readonly keys: FleetKeys;
  private readonly runs: LRUCache<string, RunRecord> | undefined;
  private readonly tasks: LRUCache<string, PreparedTask> | undefined;
  private readonly blobs: LRUCache<string, Buffer> | undefined;

  constructor(readonly redis: Redis, readonly prefix: string, options: RunStoreOptions = {}) {
    this.keys = fleetKeys(prefix);
    if (options.cache) {
      this.runs = new LRUCache({ max: 64, ttl: RUN_RECORD_CACHE_MS });
      this.tasks = new LRUCache({ max: 20_000 });
      // An image larger than the whole budget is not kept; sizes are at least 1 (lru-cache refuses 0).
      this.blobs = new LRUCache({ maxSize: options.cacheImageBytes ?? 256 * 1024 * 1024, sizeCalculation: (b) => Math.max(1, b.length) });
    }
  }

  /** Creates the run record; returns false when a run with this id already exists (kept as it is). */
  async createRun(record: RunRecord): Promise<boolean> {
    const created = await this.redis.hsetnx(this.keys.run(record.run_id), 'record', JSON.stringify(record));
    await this.redis.zadd(this.keys.runs(), Date.parse(record.created_at), record.run_id);
    return created === 1;
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    const cached = this.runs?.get(runId);
    if (cached) return cached;
    const raw = await this.redis.hget(this.keys.run(runId), 'record');
    if (!raw) return null;
    const run = RunRecordSchema.parse(JSON.parse(raw));
    this.runs?.set(runId, run);
    return run;
  }

  /**
   * Change a run's record with `change` (given the current one), atomically: a record changed by
   * someone else meanwhile is read again and `change` applied to that. Returns the new record.
   */
  async updateRun(runId: string, change: (run: RunRecord) => RunRecord): Promise<RunRecord> {
    const key = this.keys.run(runId);
    // One connection of its own for WATCH (EXEC, run or aborted, clears it for the next attempt).
    const watcher = this.redis.duplicate();
    try {
      for (let attempt = 0; attempt < 10; attempt++) {
        await watcher.watch(key);
        const raw = await watcher.hget(key, 'record');
        if (!raw) throw new ConfigError(`run ${runId} does not exist under the prefix ${this.prefix}; check --run-id, REDIS_URL and VCFLEET_PREFIX`);
        const next = RunRecordSchema.parse(change(RunRecordSchema.parse(JSON.parse(raw))));
        const done = await watcher.multi().hset(key, 'record', JSON.stringify(next)).exec();
        if (done !== null) {
          this.runs?.set(runId, next);
          return next;
        }
      }
    } finally {
      watcher.disconnect();
    }
    throw new InfraError(`run ${runId} kept changing while it was being updated; try again`);
  }

  async requireRun(runId: string): Promise<RunRecord> {
    const run = await this.getRun(runId);
    if (!run) throw new PoisonJobError(`run ${runId} does not exist in Redis (was it produced against another REDIS_URL or prefix?)`);
    return run;
  }

  async listRuns(): Promise<string[]> {
    return this.redis.zrange(this.keys.runs(), 0, -1);
  }

  /** How many runs the prefix holds. */
  async countRuns(): Promise<number> {
    return this.redis.zcard(this.keys.runs());
  }

  /** The records of the `limit` most recently created runs, newest first; an id whose record is gone (deleted by hand) is left out. */
  async recentRuns(limit: number): Promise<RunRecord[]> {
    const ids = limit > 0 ? await this.redis.zrevrange(this.keys.runs(), 0, limit - 1) : [];
    const runs = await Promise.all(ids.map((id) => this.getRun(id)));
    return runs.filter((r): r is RunRecord => r !== null);
  }

  async putTasks(runId: string, tasks: readonly PreparedTask[]): Promise<void> {
    for (let i = 0; i < tasks.length; i += 500) {
      const chunk = tasks.slice(i, i + 500).flatMap((t) => [t.task_id, JSON.stringify(t)]);
      await this.redis.hset(this.keys.tasks(runId), ...chunk);
    }
  }

  /** Every task id of a run. */
  async taskIds(runId: string): Promise<string[]> {
    return this.redis.hkeys(this.keys.tasks(runId));
  }

  async getTask(runId: string, taskId: string): Promise<PreparedTask> {
    const key = `${runId}\n${taskId}`;
    const cached = this.tasks?.get(key);
    if (cached) return cached;
    const raw = await this.redis.hget(this.keys.tasks(runId), taskId);
    if (!raw) throw new PoisonJobError(`task ${taskId} is not part of run ${runId}`);
    const task = PreparedTaskSchema.parse(JSON.parse(raw));
    this.tasks?.set(key, task);
    return task;
  }

  /** Stores an image once; returns true when it was new. */
  async putBlob(sha256: string, bytes: Buffer): Promise<boolean> {
    return (await this.redis.set(this.keys.blob(sha256), bytes, 'NX')) === 'OK';
  }

  async hasBlob(sha256: string): Promise<boolean> {
    return (await this.redis.exists(this.keys.blob(sha256))) === 1;
  }

  /** An image by SHA-256, checked against its hash (a blob changed in Redis is refused). */
  async getBlob(sha256: string): Promise<Buffer> {
    const cached = this.blobs?.get(sha256);
    if (cached) return cached;
    const bytes = await this.redis.getBuffer(this.keys.blob(sha256));
    if (!bytes) throw new PoisonJobError(`image ${sha256} is missing from Redis; produce the run again`);
    const actual = createHash('sha256').update(bytes).digest('hex');
    if (actual !== sha256) throw new DataError(`image ${sha256} in Redis has SHA-256 ${actual}: it was changed after it was produced; produce the run again`);
    this.blobs?.set(sha256, bytes);
    return bytes;
  }

  async putTranscript(runId: string, rolloutId: string, record: Buffer, images: ReadonlyMap<string, Buffer>): Promise<void> {
    const fields: Array<string | Buffer> = ['record', record];
    for (const [sha, bytes] of images) fields.push(`img:${sha}`, bytes);
    await this.redis.hset(this.keys.transcript(runId, rolloutId), ...fields);
  }

  /** A rollout's trajectory, beside its transcript's parts (same key: written and removed with them). */
  async putTrajectory(runId: string, rolloutId: string, trajectory: Buffer, images: ReadonlyMap<string, Buffer>): Promise<void> {
    const fields: Array<string | Buffer> = ['trajectory', trajectory];
    for (const [sha, bytes] of images) fields.push(`img:${sha}`, bytes);
    await this.redis.hset(this.keys.transcript(runId, rolloutId), ...fields);
  }

  async putTranscriptJudge(runId: string, rolloutId: string, judge: unknown): Promise<void> {
    await this.redis.hset(this.keys.transcript(runId, rolloutId), 'judge', JSON.stringify(judge));
  }

  async getTranscriptParts(runId: string, rolloutId: string): Promise<TranscriptParts> {
    const all = await this.redis.hgetallBuffer(this.keys.transcript(runId, rolloutId));
    const images = new Map<string, Buffer>();
    for (const [field, value] of Object.entries(all)) if (field.startsWith('img:')) images.set(field.slice(4), value);
    return { record: all.record ?? null, judge: all.judge ? all.judge.toString('utf8') : null, images, trajectory: all.trajectory ?? null };
  }

  async deleteTranscript(runId: string, rolloutId: string): Promise<void> {
    await this.redis.del(this.keys.transcript(runId, rolloutId));
  }

  /** Keep a rollout's outcome, for rejudging it without the agent. */
  async putOutcome(runId: string, rolloutId: string, outcome: RolloutOutcome): Promise<void> {
    await this.redis.hset(this.keys.outcomes(runId), rolloutId, JSON.stringify(outcome));
  }

  /** A rollout's kept outcome (one kept by an older vcfleet parses with the defaults), or null. */
  async getOutcome(runId: string, rolloutId: string): Promise<RolloutOutcome | null> {
    const raw = await this.redis.hget(this.keys.outcomes(runId), rolloutId);
    return raw ? RolloutOutcomeSchema.parse(JSON.parse(raw)) : null;
  }

  async getRow(runId: string, rolloutId: string): Promise<Row | null> {
    const raw = await this.redis.hget(this.keys.rows(runId), rolloutId);
    return raw ? RowSchema.parse(JSON.parse(raw)) : null;
  }

  async putRow(row: Row): Promise<void> {
    await this.redis.hset(this.keys.rows(row.run_id), row.rollout_id, JSON.stringify(row));
  }

  /** Stores the row unless the rollout has one; true when it was stored (one round trip). */
  async putRowIfAbsent(row: Row): Promise<boolean> {
    return (await this.redis.hsetnx(this.keys.rows(row.run_id), row.rollout_id, JSON.stringify(row))) === 1;
  }

  /** Record where the results consumer writes a run's output (its host and path). */
  async putOutputLocation(runId: string, location: OutputLocation): Promise<void> {
    await this.redis.hset(this.keys.run(runId), 'output', JSON.stringify(location));
  }

  /** Where a run's output is written, once a results consumer opened it. */
  async getOutputLocation(runId: string): Promise<OutputLocation | null> {
    const raw = await this.redis.hget(this.keys.run(runId), 'output');
    if (!raw) return null;
    const parsed = OutputLocationSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  }

  /** The rollouts of a run: its record's total, or for a `vcfleet serve` run (whose tasks come by request) the requests it accepted so far. */
  async totalOf(run: RunRecord): Promise<number> {
    return run.origin === 'serve' ? this.redis.scard(this.keys.enqueued(run.run_id)) : run.total;
  }

  /** How many rollouts of a run have their row. */
  async countRows(runId: string): Promise<number> {
    return this.redis.hlen(this.keys.rows(runId));
  }

  /** Every row of a run (HSCAN, so a large run does not block Redis). */
  async *scanRows(runId: string): AsyncGenerator<Row> {
    let cursor = '0';
    do {
      const [next, flat] = await this.redis.hscan(this.keys.rows(runId), cursor, 'COUNT', 500);
      cursor = next;
      for (let i = 1; i < flat.length; i += 2) yield RowSchema.parse(JSON.parse(flat[i]));
    } while (cursor !== '0');
  }
}
