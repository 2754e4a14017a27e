/**
 * The rollouts of a `vcfleet serve` service, kept in Redis only (a restarted serve loses nothing):
 * accepting a request (its task record, then its rollout job on the run's own queue, once per rollout
 * id), waiting for its response (named on the run's channel by the results consumer; read again every
 * few seconds in case a message was missed), and cancelling it.
 */
import type { Redis } from 'ioredis';
import type { Config } from '../shared/config/load.ts';
import type { Logger } from '../shared/logger.ts';
import { enqueue, openQueue, type RolloutJob } from '../shared/queue/registry.ts';
import { RequestStore } from '../shared/stores/request-store.ts';
import { RequestIds, type RequestIdentity } from '../shared/stores/request-ids.ts';
import { checkVersion, refuseOther } from './rollout-identity.ts';
import { cancelledByVersionError, encodeRecord, type RequestResponse } from '../shared/records/request-task.ts';
import { cancelRollouts } from './cancel-rollouts.ts';
import { RunStore, type RunRecord } from '../shared/stores/run-store.ts';
import { RequestRefused, type ParsedRun } from './gym-request.ts';
import { requestRecord, serveRolloutId } from './request-record.ts';
import { randomUUID } from 'node:crypto';

/**
 * How often a waiter reads its response again, whatever the channel said (ms): a fallback only (the
 * channel wakes it, and every waiter is woken when the subscriber reconnects, having maybe missed a
 * message), kept long so that many waiting clients do not cost the `--with-workers` process much.
 */
const POLL_MS = 10_000;
/** How old a pending place without its request's record must be to be let go (ms). */
const STALE_MS = 60_000;
/** When a client refused for the run's bound asks again (s). */
const RETRY_AFTER_S = 5;
const MIB = 1024 * 1024;
const mibText = (bytes: number) => `${Math.round((bytes / MIB) * 10) / 10} MiB`;

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
  private readonly ids: RequestIds;
  private readonly rollouts;
  private readonly judge;
  private readonly results;
  private readonly subscriber: Redis;
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly ready: Promise<unknown>;

  constructor(private readonly deps: RolloutServiceDeps) {
    const { config, redis, run } = deps;
    const prefix = config.queues.prefix;
    this.store = new RunStore(redis, prefix);
    this.requests = new RequestStore(redis, prefix);
    this.ids = new RequestIds(redis, prefix);
    this.rollouts = openQueue('rollout', redis, prefix, { policy: config.queues, scope: run.queue_scope });
    this.judge = openQueue('judge', redis, prefix, { scope: run.queue_scope });
    this.results = openQueue('results', redis, prefix, { policy: config.queues, scope: run.queue_scope });
    this.subscriber = redis.duplicate();
    this.subscriber.on('message', (_channel: string, rolloutId: string) => this.wake(rolloutId));
    // Messages sent while the subscriber was away are lost: after a reconnect every waiter reads again.
    let connected = false;
    this.subscriber.on('ready', () => {
      if (connected) for (const id of [...this.waiters.keys()]) this.wake(id);
      connected = true;
    });
    this.ready = this.subscriber.subscribe(this.requests.keys.requestResponses(run.run_id)).catch((err: unknown) => {
      deps.logger.warn({ err: (err as Error).message }, 'cannot subscribe to the responses channel; waiting by reading again every 10 s');
    });
  }

  get runId(): string {
    return this.deps.run.run_id;
  }

  /**
   * Accept a request: its rollout runs once per rollout id, whoever asks how often. Returns the
   * rollout's ids; a rollout id accepted before with another row or another weight version is refused
   * (409), decided in one step in Redis (request-ids.ts) however many ask at once; a new one past the
   * run's bound is refused (429, nothing kept).
   */
  async accept(parsed: ParsedRun): Promise<{ rolloutId: string; ngRolloutId: string; created: boolean }> {
    const ngRolloutId = parsed.ngRolloutId ?? randomUUID();
    const rolloutId = serveRolloutId(this.runId, ngRolloutId);
    // A claim let go meanwhile (its maker refused by the bound) is claimed again, a few times at most.
    for (let attempt = 1; ; attempt++) {
      const accepted = await this.acceptOnce(parsed, ngRolloutId, rolloutId);
      if (accepted) return accepted;
      if (attempt === 3) throw new Error(`rollout id ${JSON.stringify(ngRolloutId)} was claimed and let go ${attempt} times while this request was being kept`);
    }
  }

  /** One try of accept; null when the id's claim was let go before its record was kept. */
  private async acceptOnce(parsed: ParsedRun, ngRolloutId: string, rolloutId: string): Promise<{ rolloutId: string; ngRolloutId: string; created: boolean } | null> {
    const { config, run } = this.deps;
    const identity: RequestIdentity = { weightVersion: parsed.body.policy?.weight_version ?? null, fingerprint: parsed.fingerprint };
    // Its claim and name first, then its record, then its job: Redis replicates in order, so a failover that keeps
    // any of them keeps the name, and the results consumer's reconcile finds the rollout by it.
    const claim = await this.ids.claim(run.run_id, rolloutId, identity);
    if (claim.outcome === 'other') refuseOther(ngRolloutId, claim.held, parsed);
    const named = claim.named;
    if (!named) {
      // Named before this service kept claims (or by a reconcile): the record or the row says whose it is.
      await this.checkSame(rolloutId, ngRolloutId, parsed);
      if (await this.requests.hasTask(run.run_id, rolloutId)) return { rolloutId, ngRolloutId, created: false };
      // Only its row is left (its response expired): the same weights get it (410), other weights are refused.
      const row = await this.store.getRow(run.run_id, rolloutId);
      if (row) {
        checkVersion(ngRolloutId, row.weight_version ?? null, parsed);
        return { rolloutId, ngRolloutId, created: false };
      }
      // Accepted before, but a lost Redis (a failover) kept its name and lost its record before it had a row: it is accepted anew.
      // A finished job kept under its id would make the add below a no-op.
      const kept = await this.rollouts.getJob(rolloutId);
      if (kept && ['completed', 'failed'].includes(await kept.getState())) await kept.remove().catch(() => undefined);
    }
    const letGo = () => this.ids.release(run.run_id, rolloutId, identity, named).catch(() => false);
    const admitted = await this.admit(rolloutId, ngRolloutId, parsed).catch(async (err: unknown) => {
      await letGo();
      throw err;
    });
    let created = false;
    try {
      const record = requestRecord(parsed, { benchmark: run.benchmark, ngRolloutId, responseTtlS: config.serve.response_ttl_s, fetchedTtlS: config.serve.fetched_ttl_s });
      const kept = await this.ids.keepTask(run.run_id, rolloutId, identity, encodeRecord(record));
      if (kept === 'lost') {
        if (!(await this.requests.hasTask(run.run_id, rolloutId))) await this.requests.pending.release(run.run_id, rolloutId);
        return null;
      }
      created = kept === 'kept';
      if (!created) await this.checkSame(rolloutId, ngRolloutId, parsed);
      const job: RolloutJob = { v: 1, run_id: run.run_id, task_id: record.task.task_id, repeat: parsed.body._ng_rollout_index ?? 0, rollout_id: rolloutId, task_source: 'request' };
      // Its job id is the rollout id: a request asked twice at once adds one job.
      await enqueue('rollout', this.rollouts, job);
    } catch (err) {
      // Nothing half-made: a request that has no job has no record, nor its claim and name, nor its place in the bound.
      if (created) await this.requests.deleteTask(run.run_id, rolloutId).catch(() => undefined);
      // All stay when another request of the same id made the record meanwhile.
      const others = !created && (await this.requests.hasTask(run.run_id, rolloutId).catch(() => true));
      if (!others) await letGo();
      if (admitted && !others) await this.requests.pending.release(run.run_id, rolloutId).catch(() => undefined);
      throw err;
    }
    this.deps.logger.info({ rollout_id: rolloutId, ng_rollout_id: ngRolloutId, created }, created ? 'request accepted' : 'request asked again: its rollout runs once');
    return { rolloutId, ngRolloutId, created };
  }

  /** Take the rollout into the run's bound (idempotent); throws 429 (413 for a request over the whole budget) when there is no room. */
  private async admit(rolloutId: string, ngRolloutId: string, parsed: ParsedRun): Promise<true> {
    const s = this.deps.config.serve;
    const imageBytes = parsed.images.reduce((n, i) => n + i.bytes.length, 0);
    const maxImageBytes = s.max_pending_image_mib * MIB;
    if (imageBytes > maxImageBytes) throw new RequestRefused(413, `the request's images (${mibText(imageBytes)}) are over the run's whole image budget of ${s.max_pending_image_mib} MiB (serve.max_pending_image_mib)`);
    const entry = { rolloutId, ngRolloutId, weightVersion: parsed.body.policy?.weight_version ?? null, imageBytes };
    const limits = { maxPending: s.max_pending, maxImageBytes };
    let admission = await this.requests.pending.admit(this.runId, entry, limits);
    if (!admission.admitted && (await this.releaseStale()) > 0) admission = await this.requests.pending.admit(this.runId, entry, limits);
    if (admission.admitted) return true;
    // Counted in Redis (vcfleet status, Prometheus); a line each would flood the log while clients wait out the bound.
    this.deps.logger.debug({ ng_rollout_id: ngRolloutId, reason: admission.reason, pending: admission.pending }, 'request refused: the run is at its bound');
    throw new RequestRefused(
      429,
      admission.reason === 'max_pending'
        ? `the run has ${admission.pending} requests pending, its bound (serve.max_pending ${s.max_pending}): ask again after Retry-After seconds, or cancel stragglers (POST /cancel)`
        : `the pending requests of the run hold ${mibText(admission.imageBytes)} of images; this one's ${mibText(imageBytes)} would pass the budget of ${s.max_pending_image_mib} MiB (serve.max_pending_image_mib): ask again after Retry-After seconds`,
      RETRY_AFTER_S,
    );
  }

  /**
   * Let go of pending places, a minute after they were taken, whose request has no record (a serve that
   * died between taking the place and keeping the record; its client may never ask again) or has its
   * response already (left by a results consumer older than the bound). Returns how many.
   */
  private async releaseStale(): Promise<number> {
    const old = (await this.requests.pending.entries(this.runId)).filter((e) => Date.now() - (e.admittedAt ?? 0) > STALE_MS);
    let released = 0;
    for (const e of old) {
      const keys = this.requests.keys;
      const [task, response] = await Promise.all([this.deps.redis.exists(keys.requestTask(this.runId, e.rolloutId)), this.deps.redis.exists(keys.requestResponse(this.runId, e.rolloutId))]);
      if (task === 1 && response === 0) continue;
      if (await this.requests.pending.release(this.runId, e.rolloutId)) released++;
    }
    if (released) this.deps.logger.warn({ released }, 'pending places of requests that were never kept let go');
    return released;
  }

  private async checkSame(rolloutId: string, ngRolloutId: string, parsed: ParsedRun): Promise<void> {
    const existing = await this.requests.findTask(this.runId, rolloutId);
    if (existing && (existing.policy.weight_version !== (parsed.body.policy?.weight_version ?? null) || existing.fingerprint !== parsed.fingerprint)) {
      refuseOther(ngRolloutId, { weightVersion: existing.policy.weight_version, fingerprint: existing.fingerprint }, parsed);
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

  /** Cancel a rollout (cancel-rollouts.ts): 'done' when it finished already, null when unknown. */
  async cancel(ngRolloutId: string): Promise<'cancelled' | 'done' | null> {
    const state = await this.state(ngRolloutId);
    if (state === null) return null;
    if (state.state !== 'pending') return 'done';
    await cancelRollouts(this.cancelDeps(), [state.rolloutId]);
    return 'cancelled';
  }

  /**
   * Cancel many at once (`POST /cancel`): the rollouts of these client ids, or every pending rollout
   * of a weight version (a step's stragglers). Says which were cancelled, already done, or unknown.
   */
  async cancelMany(which: { ids?: readonly string[]; weightVersion?: string }): Promise<{ cancelled: string[]; done: string[]; unknown: string[] }> {
    const out = { cancelled: [] as string[], done: [] as string[], unknown: [] as string[] };
    const ofVersion = new Map<string, { rolloutId: string; ngRolloutId: string }>();
    const byId = new Map<string, { rolloutId: string; ngRolloutId: string }>();
    if (which.weightVersion !== undefined) {
      for (const e of await this.requests.pending.entries(this.runId)) if (e.weightVersion === which.weightVersion) ofVersion.set(e.rolloutId, e);
    }
    for (const id of which.ids ?? []) {
      const state = await this.state(id);
      if (state === null) out.unknown.push(id);
      else if (state.state !== 'pending') out.done.push(id);
      else if (!ofVersion.has(state.rolloutId)) byId.set(state.rolloutId, { rolloutId: state.rolloutId, ngRolloutId: id });
    }
    // The rows of those cancelled with their weight version say so; those named by id, as a DELETE would.
    if (ofVersion.size) await cancelRollouts(this.cancelDeps(), [...ofVersion.keys()], cancelledByVersionError(which.weightVersion!));
    await cancelRollouts(this.cancelDeps(), [...byId.keys()]);
    out.cancelled = [...ofVersion.values(), ...byId.values()].map((t) => t.ngRolloutId);
    return out;
  }

  private cancelDeps() {
    return { run: this.deps.run, requests: this.requests, rollouts: this.rollouts, judge: this.judge, results: this.results, logger: this.deps.logger };
  }

  async close(): Promise<void> {
    for (const set of this.waiters.values()) for (const wake of set) wake();
    this.subscriber.disconnect();
    await Promise.all([this.rollouts.close(), this.judge.close(), this.results.close()]);
  }
}
