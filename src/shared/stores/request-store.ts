/**
 * Where `vcfleet serve` and the roles meet over one request's rollout, in Redis: its task record
 * (written by serve when it accepts the request, read by every stage), its cancel mark (set by
 * `DELETE /rollouts/{id}`), and its finished response (left by the results consumer, named on the
 * run's channel, fetched by serve, expiring after a TTL). See request-task.ts for the records.
 */
import type { Redis } from 'ioredis';
import { PoisonJobError } from '../errors.ts';
import { fleetKeys, type FleetKeys } from '../redis/keys.ts';
import type { RolloutJob } from '../queue/registry.ts';
import { decodeRequestResponse, decodeRequestTask, encodeRecord, type RequestResponse, type RequestTask } from '../records/request-task.ts';
import type { RunStore } from './run-store.ts';
import { ServePending } from './serve-pending.ts';
import type { PreparedTask } from '../records/task.ts';

/** How long a cancel mark is kept, in seconds (longer than any rollout's retries take). */
const CANCEL_TTL_S = 7 * 86_400;

export class RequestStore {
  readonly keys: FleetKeys;
  /** The run's bound of pending requests: a rollout whose response is left is no longer pending. */
  readonly pending: ServePending;

  constructor(readonly redis: Redis, readonly prefix: string) {
    this.keys = fleetKeys(prefix);
    this.pending = new ServePending(redis, prefix);
  }

  /** Keep the task record of a new rollout; false when the rollout has one already (kept as it is). */
  async putTask(runId: string, rolloutId: string, record: RequestTask): Promise<boolean> {
    return (await this.redis.set(this.keys.requestTask(runId, rolloutId), encodeRecord(record), 'NX')) === 'OK';
  }

  /** The task record of a rollout; null when there is none (never accepted, or expired after its response). */
  async findTask(runId: string, rolloutId: string): Promise<RequestTask | null> {
    const raw = await this.redis.getBuffer(this.keys.requestTask(runId, rolloutId));
    return raw ? decodeRequestTask(raw) : null;
  }

  async hasTask(runId: string, rolloutId: string): Promise<boolean> {
    return (await this.redis.exists(this.keys.requestTask(runId, rolloutId))) === 1;
  }

  async getTask(runId: string, rolloutId: string): Promise<RequestTask> {
    const record = await this.findTask(runId, rolloutId);
    if (!record) throw new PoisonJobError(`the request of rollout ${rolloutId} is no longer in Redis (its response expired, or it was removed): ask vcfleet serve for it again`);
    return record;
  }

  async deleteTask(runId: string, rolloutId: string): Promise<void> {
    await this.redis.del(this.keys.requestTask(runId, rolloutId));
  }

  async cancel(runId: string, rolloutId: string): Promise<void> {
    await this.redis.set(this.keys.requestCancel(runId, rolloutId), new Date().toISOString(), 'EX', CANCEL_TTL_S);
  }

  async isCancelled(runId: string, rolloutId: string): Promise<boolean> {
    return (await this.redis.exists(this.keys.requestCancel(runId, rolloutId))) === 1;
  }

  /** Which of these rollouts were cancelled (one round trip). */
  async cancelledOf(rollouts: ReadonlyArray<{ runId: string; rolloutId: string }>): Promise<Set<string>> {
    if (rollouts.length === 0) return new Set();
    const pipeline = this.redis.pipeline();
    for (const r of rollouts) pipeline.exists(this.keys.requestCancel(r.runId, r.rolloutId));
    const replies = (await pipeline.exec()) ?? [];
    return new Set(rollouts.filter((_, i) => replies[i]?.[1] === 1).map((r) => r.rolloutId));
  }

  /**
   * Leave a finished response for serve, for `ttlS` seconds, and name it on the run's channel; the
   * task record expires with it, and the rollout stops counting against the run's pending bound.
   * `onlyIfAbsent`: a row delivered again keeps the response there is.
   */
  async putResponse(runId: string, response: RequestResponse, ttlS: number, onlyIfAbsent: boolean): Promise<void> {
    const key = this.keys.requestResponse(runId, response.rollout_id);
    const bytes = encodeRecord(response);
    if (onlyIfAbsent) await this.redis.set(key, bytes, 'EX', ttlS, 'NX');
    else await this.redis.set(key, bytes, 'EX', ttlS);
    await this.redis.expire(this.keys.requestTask(runId, response.rollout_id), ttlS);
    await this.pending.release(runId, response.rollout_id);
    await this.redis.publish(this.keys.requestResponses(runId), response.rollout_id);
  }

  async getResponse(runId: string, rolloutId: string): Promise<RequestResponse | null> {
    const raw = await this.redis.getBuffer(this.keys.requestResponse(runId, rolloutId));
    return raw ? decodeRequestResponse(raw) : null;
  }

  /** A response was fetched: keep it `ttlS` seconds more (a client whose connection dropped asks again), no longer. */
  async fetched(runId: string, rolloutId: string, ttlS: number): Promise<void> {
    const key = this.keys.requestResponse(runId, rolloutId);
    const left = await this.redis.ttl(key);
    if (left < 0 || left > ttlS) await this.redis.expire(key, ttlS);
  }
}

/** A rollout's task: the run's prepared one, or the one its request gave (`task_source: request`), with that request. */
export async function rolloutTask(
  store: Pick<RunStore, 'getTask'>,
  requests: Pick<RequestStore, 'getTask'> | undefined,
  job: Pick<RolloutJob, 'run_id' | 'task_id' | 'rollout_id' | 'task_source'>,
): Promise<{ task: PreparedTask; request: RequestTask | null }> {
  if (job.task_source !== 'request') return { task: await store.getTask(job.run_id, job.task_id), request: null };
  if (!requests) throw new PoisonJobError(`rollout ${job.rollout_id} has its task in its request's record, which this stage cannot read`);
  const request = await requests.getTask(job.run_id, job.rollout_id);
  return { task: request.task, request };
}
