/**
 * The rollouts of a `vcfleet serve` service, kept in Redis only (a restarted serve loses nothing):
 * accepting a request (its task record, then its rollout job on the run's own queue, once per rollout
 * id), waiting for its response (named on the run's channel by the results consumer; read again every
 * few seconds in case a message was missed), and cancelling it.
 */
import type { Redis } from 'ioredis';
import type { Config } from '../shared/config.ts';
import type { Logger } from '../shared/logger.ts';
import { enqueue, openQueue, type RolloutJob } from '../shared/queues.ts';
import { RequestStore } from '../shared/request-store.ts';
import { CANCELLED_ERROR, type RequestResponse } from '../shared/request-task.ts';
import { buildRow } from '../shared/rows.ts';
import { rowContext } from '../shared/row-context.ts';
import { RunStore, type RunRecord } from '../shared/run-store.ts';
import { RequestRefused, type ParsedRun } from './gym-request.ts';
import { requestRecord, serveRolloutId } from './request-record.ts';
import { randomUUID } from 'node:crypto';

/** How often a waiter reads its response again, whatever the channel said (ms). */
const POLL_MS = 2000;

export type RolloutState =
  | { state: 'done'; response: RequestResponse }
  | { state: 'pending'; rolloutId: string; ngRolloutId: string }
  /** Finished, but its response expired: only its row is left. */
  | { state: 'gone'; rolloutId: string; ngRolloutId: string; row: unknown };

export interface RolloutServiceDeps {
  config: Config;
  /** A worker connection (waits out Redis outages); the caller owns it. */
  redis: Redis;
  run: RunRecord;
  logger: Logger;
}

export class RolloutService {
  private readonly store: RunStore;
  private readonly requests: RequestStore;
  private readonly rollouts;
  private readonly results;
  private readonly subscriber: Redis;
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly ready: Promise<unknown>;

  constructor(private readonly deps: RolloutServiceDeps) {
    const { config, redis, run } = deps;
    const prefix = config.queues.prefix;
    this.store = new RunStore(redis, prefix);
    this.requests = new RequestStore(redis, prefix);
    this.rollouts = openQueue('rollout', redis, prefix, { policy: config.queues, scope: run.queue_scope });
    this.results = openQueue('results', redis, prefix, { policy: config.queues, scope: run.queue_scope });
    this.subscriber = redis.duplicate();
    this.subscriber.on('message', (_channel: string, rolloutId: string) => this.wake(rolloutId));
    this.ready = this.subscriber.subscribe(this.requests.keys.requestResponses(run.run_id)).catch((err: unknown) => {
      deps.logger.warn({ err: (err as Error).message }, 'cannot subscribe to the responses channel; waiting by reading again every 2 s');
    });
  }

  get runId(): string {
    return this.deps.run.run_id;
  }

  /**
   * Accept a request: its rollout runs once per rollout id, whoever asks how often. Returns the
   * rollout's ids; a rollout id accepted before with another row is refused (409).
   */
  async accept(parsed: ParsedRun): Promise<{ rolloutId: string; ngRolloutId: string; created: boolean }> {
    const { config, run } = this.deps;
    const ngRolloutId = parsed.ngRolloutId ?? randomUUID();
    const rolloutId = serveRolloutId(run.run_id, ngRolloutId);
    const enqueuedKey = this.store.keys.enqueued(run.run_id);
    // Its name first, then its record, then its job: Redis replicates in order, so a failover that keeps
    // any of them keeps the name, and the results consumer's reconcile finds the rollout by it.
    const named = (await this.deps.redis.sadd(enqueuedKey, rolloutId)) === 1;
    if (!named) {
      await this.checkSame(rolloutId, ngRolloutId, parsed.fingerprint);
      // Accepted before, unless a lost Redis (a failover) kept its name but lost its record before it had a row: then it is accepted anew.
      if ((await this.requests.hasTask(run.run_id, rolloutId)) || (await this.store.getRow(run.run_id, rolloutId))) return { rolloutId, ngRolloutId, created: false };
      // A finished job kept under its id would make the add below a no-op.
      const kept = await this.rollouts.getJob(rolloutId);
      if (kept && ['completed', 'failed'].includes(await kept.getState())) await kept.remove().catch(() => undefined);
    }
    let created = false;
    try {
      const record = requestRecord(parsed, { benchmark: run.benchmark, ngRolloutId, responseTtlS: config.serve.response_ttl_s, fetchedTtlS: config.serve.fetched_ttl_s });
      created = await this.requests.putTask(run.run_id, rolloutId, record);
      if (!created) await this.checkSame(rolloutId, ngRolloutId, parsed.fingerprint);
      const job: RolloutJob = { v: 1, run_id: run.run_id, task_id: record.task.task_id, repeat: parsed.body._ng_rollout_index ?? 0, rollout_id: rolloutId, task_source: 'request' };
      // Its job id is the rollout id: a request asked twice at once adds one job.
      await enqueue('rollout', this.rollouts, job);
    } catch (err) {
      // Nothing half-made: a request that has no job has no record, nor its name.
      if (created) await this.requests.deleteTask(run.run_id, rolloutId).catch(() => undefined);
      // The name stays when another request of the same id made the record meanwhile.
      const others = !created && (await this.requests.hasTask(run.run_id, rolloutId).catch(() => true));
      if (named && !others) await this.deps.redis.srem(enqueuedKey, rolloutId).catch(() => undefined);
      throw err;
    }
    this.deps.logger.info({ rollout_id: rolloutId, ng_rollout_id: ngRolloutId, created }, created ? 'request accepted' : 'request asked again: its rollout runs once');
    return { rolloutId, ngRolloutId, created };
  }

  private async checkSame(rolloutId: string, ngRolloutId: string, fingerprint: string): Promise<void> {
    const existing = await this.requests.findTask(this.runId, rolloutId);
    if (existing && existing.fingerprint !== fingerprint) {
      throw new RequestRefused(409, `_ng_rollout_id ${JSON.stringify(ngRolloutId)} was accepted before with another row: the same id is the same rollout; give a new _ng_rollout_id`);
    }
  }

  /** Where a rollout is, by the client's rollout id: done (its response), pending, gone (only its row left); null when unknown. */
  async state(ngRolloutId: string): Promise<RolloutState | null> {
    const rolloutId = serveRolloutId(this.runId, ngRolloutId);
    const response = await this.requests.getResponse(this.runId, rolloutId);
    if (response) return { state: 'done', response };
    const known = (await this.deps.redis.sismember(this.store.keys.enqueued(this.runId), rolloutId)) === 1 || (await this.requests.hasTask(this.runId, rolloutId));
    if (!known) return null;
    const row = await this.store.getRow(this.runId, rolloutId);
    // A row with no response yet: the results consumer is about to leave it, unless the request expired with its response.
    if (row && !(await this.requests.hasTask(this.runId, rolloutId))) return { state: 'gone', rolloutId, ngRolloutId, row };
    return { state: 'pending', rolloutId, ngRolloutId };
  }

  /**
   * Wait until the rollout is done (or gone, or `signal` aborts: the client left); the response is
   * then kept only `fetched_ttl_s` more. Null when the rollout is unknown.
   */
  async wait(ngRolloutId: string, signal: AbortSignal): Promise<RolloutState | null> {
    await this.ready;
    const rolloutId = serveRolloutId(this.runId, ngRolloutId);
    for (;;) {
      let wake!: () => void;
      const woken = new Promise<void>((resolve) => (wake = resolve));
      const set = this.waiters.get(rolloutId) ?? new Set();
      set.add(wake);
      this.waiters.set(rolloutId, set);
      try {
        const state = await this.state(ngRolloutId);
        if (state === null || state.state !== 'pending' || signal.aborted) {
          if (state?.state === 'done') await this.requests.fetched(this.runId, rolloutId, this.deps.config.serve.fetched_ttl_s);
          return state;
        }
        await new Promise<void>((resolve) => {
          // Every way out removes the abort listener: a client that waits long must not pile them up.
          const timer = setTimeout(() => done(), POLL_MS);
          const done = () => {
            clearTimeout(timer);
            signal.removeEventListener('abort', done);
            resolve();
          };
          void woken.then(done);
          signal.addEventListener('abort', done, { once: true });
        });
      } finally {
        set.delete(wake);
        if (set.size === 0) this.waiters.delete(rolloutId);
      }
    }
  }

  private wake(rolloutId: string): void {
    for (const wake of this.waiters.get(rolloutId) ?? []) wake();
  }

  /**
   * Cancel a rollout: its cancel mark stops it wherever it is (a sandbox-worker aborts its session,
   * the judge does not grade it); one still waiting in the queue is taken out and its row made here.
   * The row says it was cancelled and is never scored.
   */
  async cancel(ngRolloutId: string): Promise<'cancelled' | 'done' | null> {
    const state = await this.state(ngRolloutId);
    if (state === null) return null;
    if (state.state !== 'pending') return 'done';
    const { rolloutId } = state;
    await this.requests.cancel(this.runId, rolloutId);
    const job = await this.rollouts.getJob(rolloutId);
    const waiting = job ? ['waiting', 'delayed', 'prioritized', 'paused', 'waiting-children'].includes(await job.getState()) : false;
    // A job that became active meanwhile cannot be removed (it is locked): its worker sees the mark.
    const removed = waiting && job ? await job.remove().then(() => true, () => false) : false;
    if (removed) {
      const record = await this.requests.getTask(this.runId, rolloutId);
      const run = this.deps.run;
      const row = buildRow(rowContext(run, record.task, { rollout_id: rolloutId, repeat: job!.data.repeat }, record), null, { kind: 'masked', failure: 'infra_failed', error: CANCELLED_ERROR });
      await enqueue('results', this.results, { v: 1, row });
    }
    this.deps.logger.info({ rollout_id: rolloutId, removed_from_queue: removed }, 'rollout cancelled by its client');
    return 'cancelled';
  }

  async close(): Promise<void> {
    for (const set of this.waiters.values()) for (const wake of set) wake();
    this.subscriber.disconnect();
    await Promise.all([this.rollouts.close(), this.results.close()]);
  }
}
