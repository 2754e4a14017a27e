/**
 * What a run keeps in Redis besides its jobs: the run record (config snapshot without secrets), its
 * tasks, the images (once each, by SHA-256), the agent outcomes (for rejudging) and the rows.
 */
import { z } from 'zod';
import type { Redis } from 'ioredis';
import { fleetKeys, type FleetKeys } from './keys.ts';
import { PreparedTaskSchema, type PreparedTask } from './task.ts';
import { AgentOutcomeSchema, type AgentOutcome } from './queues.ts';
import { RowSchema, type Row } from './rows.ts';
import { PoisonJobError } from './errors.ts';

export const RunRecordSchema = z.object({
  run_id: z.string(),
  benchmark: z.string(),
  created_at: z.string(),
  num_tasks: z.number().int(),
  num_repeats: z.number().int(),
  /** Rollouts in the run: tasks x repeats. */
  total: z.number().int(),
  output_jsonl_fpath: z.string(),
  policy_model: z.string(),
  judge_model: z.string(),
  /** The resolved config with secrets replaced by `***`. */
  config: z.record(z.string(), z.unknown()),
});
export type RunRecord = z.infer<typeof RunRecordSchema>;

export class RunStore {
  readonly keys: FleetKeys;
  constructor(readonly redis: Redis, readonly prefix: string) {
    this.keys = fleetKeys(prefix);
  }

  /** Creates the run record; returns false when a run with this id already exists (kept as it is). */
  async createRun(record: RunRecord): Promise<boolean> {
    const created = await this.redis.hsetnx(this.keys.run(record.run_id), 'record', JSON.stringify(record));
    await this.redis.zadd(this.keys.runs(), Date.parse(record.created_at), record.run_id);
    return created === 1;
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    const raw = await this.redis.hget(this.keys.run(runId), 'record');
    return raw ? RunRecordSchema.parse(JSON.parse(raw)) : null;
  }

  async requireRun(runId: string): Promise<RunRecord> {
    const run = await this.getRun(runId);
    if (!run) throw new PoisonJobError(`run ${runId} does not exist in Redis (was it produced against another REDIS_URL or prefix?)`);
    return run;
  }

  async listRuns(): Promise<string[]> {
    return this.redis.zrange(this.keys.runs(), 0, -1);
  }

  async putTasks(runId: string, tasks: readonly PreparedTask[]): Promise<void> {
    for (let i = 0; i < tasks.length; i += 500) {
      const chunk = tasks.slice(i, i + 500).flatMap((t) => [t.task_id, JSON.stringify(t)]);
      await this.redis.hset(this.keys.tasks(runId), ...chunk);
    }
  }

  async getTask(runId: string, taskId: string): Promise<PreparedTask> {
    const raw = await this.redis.hget(this.keys.tasks(runId), taskId);
    if (!raw) throw new PoisonJobError(`task ${taskId} is not part of run ${runId}`);
    return PreparedTaskSchema.parse(JSON.parse(raw));
  }

  /** Stores an image once; returns true when it was new. */
  async putBlob(sha256: string, bytes: Buffer): Promise<boolean> {
    return (await this.redis.set(this.keys.blob(sha256), bytes, 'NX')) === 'OK';
  }

  async hasBlob(sha256: string): Promise<boolean> {
    return (await this.redis.exists(this.keys.blob(sha256))) === 1;
  }

  async getBlob(sha256: string): Promise<Buffer> {
    const bytes = await this.redis.getBuffer(this.keys.blob(sha256));
    if (!bytes) throw new PoisonJobError(`image ${sha256} is missing from Redis; produce the run again`);
    return bytes;
  }

  async putOutcome(runId: string, rolloutId: string, outcome: AgentOutcome): Promise<void> {
    await this.redis.hset(this.keys.outcomes(runId), rolloutId, JSON.stringify(outcome));
  }

  async getOutcome(runId: string, rolloutId: string): Promise<AgentOutcome | null> {
    const raw = await this.redis.hget(this.keys.outcomes(runId), rolloutId);
    return raw ? AgentOutcomeSchema.parse(JSON.parse(raw)) : null;
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
