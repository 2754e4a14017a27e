/**
 * The thin BullMQ adapter every stage uses: parse job data first (malformed data is a poison job, never
 * retried), map error classes to BullMQ's, give the stage an AbortSignal that also fires on shutdown,
 * and hand an aborted job back to the queue without spending an attempt.
 */
import { DelayedError, UnrecoverableError, Worker, type Job, type WorkerOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { errorMessage, HandBackError, isRetryable } from '../errors.ts';
import type { Logger } from '../logger.ts';
import type { Config } from '../config/schema.ts';
import { bullQueueName, parseJob, type JobData, type QueueName, type QueueScope } from './registry.ts';
import { InFlightJobs } from './in-flight-jobs.ts';
import { watchRedisHealth } from '../redis/health.ts';
import { settleWithin } from '../settle-within.ts';
import { nudgeQueue, QueueWatchdog, readyJobs, type StallInfo } from './watchdog.ts';
import { recordStall } from './stall-record.ts';

/** How a stage's job ended in this process: done, failed (its attempt spent), or handed back to the queue. */
export type JobEnd = 'completed' | 'failed' | 'requeued';
export type JobEndHook = (outcome: JobEnd, durationMs: number, error?: unknown) => void;

/** How long after the grace a closing worker may still wait on Redis before its connections are dropped. */
const CLOSE_MARGIN_MS = 3000;

export interface StageContext {
  signal: AbortSignal;
  /** 1 for the first attempt. */
  attempt: number;
  /** True when a failure now would be the job's last. */
  finalAttempt: boolean;
}

export interface StageWorkerOptions<N extends QueueName> {
  queue: N;
  /** A worker connection (`maxRetriesPerRequest: null`); BullMQ duplicates it for blocking calls. */
  connection: Redis;
  prefix: string;
  concurrency: number;
  lockDurationMs: number;
  /** The worker's name (its worker-registry id): BullMQ stores it on every job it takes (`processedBy`). */
  name?: string;
  /** Whose queue: the fleet's (null) or one run's own. */
  scope?: QueueScope;
  limiter?: WorkerOptions['limiter'];
  logger: Logger;
  /** The process's held jobs (a second Ctrl-C hands them back before exiting); default: the worker's own. */
  inFlight?: InFlightJobs;
  handle(data: JobData<N>, ctx: StageContext): Promise<void>;
  /** Called once when a job fails for good (last attempt, or not retryable), before it moves to failed. */
  onFinalFailure?(data: JobData<N>, error: unknown, ctx: StageContext): Promise<void>;
  /** Called for every job that ended (for metrics). */
  onJobEnd?: JobEndHook;
  /** Called when the queue watchdog recovered this worker from "jobs waiting, none taken" (for metrics). */
  onStall?(info: StallInfo): void;
  /** The queue watchdog's stall threshold in ms (default 10 s; tests set it lower). */
  stallMs?: number;
}

/** What every role's worker is started with. */
export interface RoleDeps<N extends QueueName> {
  config: Config;
  /** A worker connection (`maxRetriesPerRequest: null`). */
  connection: Redis;
  logger: Logger;
  /** This worker's registry id (worker-registry.ts), stored by BullMQ on the jobs it takes. */
  workerName?: string;
  onJobEnd?: StageWorkerOptions<N>['onJobEnd'];
  /** Told of each stalled worker its queue watchdog recovered (Prometheus). */
  onStall?: StageWorkerOptions<N>['onStall'];
  /** Whose queues this worker serves: the fleet's (null, the default) or one run's own. */
  scope?: QueueScope;
  /** The process's held jobs, handed back when it must exit at once. */
  inFlight?: InFlightJobs;
}

export interface StageWorker<N extends QueueName = QueueName> {
  /** The BullMQ worker now: the queue watchdog may put a wedged one aside for a new one, so read it each time. */
  readonly worker: Worker<JobData<N>>;
  /** Put the worker aside for a new one (what the queue watchdog does to a wedged one); false when it holds a job and stays. */
  replaceWorker?(): Promise<boolean>;
  /** Stop taking jobs; running jobs get `graceMs` to finish, then are aborted and requeued. Safe to call twice. */
  close(graceMs?: number): Promise<void>;
}

/**
 * A signal that aborts when any source does. Cheaper than `AbortSignal.any` on the hot path (one per
 * job): plain listeners, removed when the job ends, so the long-lived shutdown signal keeps none.
 */
function linkedAbort(...sources: Array<AbortSignal | undefined>): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const live = sources.filter((s): s is AbortSignal => s !== undefined);
  const onAbort = (event: Event) => controller.abort((event.target as AbortSignal).reason);
  for (const source of live) {
    if (source.aborted) controller.abort(source.reason);
    else source.addEventListener('abort', onAbort, { once: true });
  }
  return { signal: controller.signal, dispose: () => live.forEach((source) => source.removeEventListener('abort', onAbort)) };
}

interface JobAttempt<N extends QueueName> {
  job: Job<JobData<N>>;
  token: string | undefined;
  data: JobData<N>;
  ctx: StageContext;
  started: number;
}

/**
 * The job's failure, after the stage threw: a job of a worker shutting down, or one the worker cannot
 * start yet (HandBackError), goes back to the queue without spending an attempt; otherwise the final
 * failure (last attempt, or not retryable) is recorded first, then BullMQ retries or fails it.
 */
async function failed<N extends QueueName>(opts: StageWorkerOptions<N>, log: Logger, shuttingDown: boolean, a: JobAttempt<N>, err: unknown): Promise<never> {
  const { job, token, data, ctx, started } = a;
  if (err instanceof HandBackError && !shuttingDown) {
    log.debug({ job_id: job.id, reason: err.message }, 'job handed back to the queue (not now)');
    await job.moveToDelayed(Date.now() + err.delayMs, token);
    opts.onJobEnd?.('requeued', Date.now() - started);
    throw new DelayedError();
  }
  if (shuttingDown) {
    log.info({ job_id: job.id }, 'shutting down: job handed back to the queue');
    // Already handed back (InFlightJobs.handBack) when the lock is gone; either way it is not failed.
    await job.moveToDelayed(Date.now() + 1000, token).catch((moveErr) => log.debug({ job_id: job.id, err: errorMessage(moveErr) }, 'job was already handed back'));
    opts.onJobEnd?.('requeued', Date.now() - started);
    throw new DelayedError();
  }
  const retryable = isRetryable(err);
  log.warn({ job_id: job.id, attempt: ctx.attempt, retryable, err: errorMessage(err) }, `${opts.queue} job failed`);
  opts.onJobEnd?.('failed', Date.now() - started, err);
  if (!retryable || ctx.finalAttempt) {
    try {
      await opts.onFinalFailure?.(data, err, ctx);
    } catch (hookErr) {
      // The job still moves to failed, where `vcfleet retry` finds it.
      log.error({ job_id: job.id, err: errorMessage(hookErr) }, 'could not record the final failure as a row');
    }
  }
  if (!retryable) throw new UnrecoverableError(errorMessage(err));
  throw err;
}

/** The BullMQ processor of a stage: parse first (malformed data is a poison job), then handle. */
function processorOf<N extends QueueName>(opts: StageWorkerOptions<N>, log: Logger, shutdown: AbortSignal, inFlight: InFlightJobs) {
  return async (job: Job<JobData<N>>, token?: string, bullSignal?: AbortSignal): Promise<void> => {
    const started = Date.now();
    const parsed = parseJob(opts.queue, job.data);
    if (!parsed.ok) {
      log.error({ job_id: job.id, error: parsed.error }, 'poison job: malformed data, not retried');
      opts.onJobEnd?.('failed', 0, parsed.error);
      throw new UnrecoverableError(parsed.error);
    }
    const attempt = job.attemptsMade + 1;
    const release = inFlight.hold(job, token);
    const jobAbort = linkedAbort(shutdown, bullSignal);
    const ctx: StageContext = { signal: jobAbort.signal, attempt, finalAttempt: attempt >= (job.opts.attempts ?? 1) };
    try {
      await opts.handle(parsed.data, ctx);
      opts.onJobEnd?.('completed', Date.now() - started);
    } catch (err) {
      await failed(opts, log, shutdown.aborted, { job, token, data: parsed.data, ctx, started }, err);
    } finally {
      jobAbort.dispose();
      release();
    }
  };
}

export function startStageWorker<N extends QueueName>(opts: StageWorkerOptions<N>): StageWorker<N> {
  const shutdown = new AbortController();
  const log = opts.logger.child({ stage: opts.queue });
  const handleJob = processorOf(opts, log, shutdown.signal, opts.inFlight ?? new InFlightJobs());
  // What the queue watchdog asks: the jobs this worker holds, and when it last took one.
  let running = 0;
  let lastTaken = 0;
  const counted = async (job: Job<JobData<N>>, token?: string, signal?: AbortSignal): Promise<void> => {
    running++;
    lastTaken = Date.now();
    try {
      await handleJob(job, token, signal);
    } finally {
      running--;
    }
  };
  const bullName = bullQueueName(opts.queue, opts.scope);
  const makeWorker = (concurrency: number) => {
    const w = new Worker<JobData<N>>(bullName, counted, {
      connection: opts.connection,
      prefix: opts.prefix,
      concurrency,
      lockDuration: opts.lockDurationMs,
      stalledInterval: Math.max(1000, Math.floor(opts.lockDurationMs / 2)),
      maxStalledCount: 3,
      limiter: opts.limiter,
      name: opts.name,
      autorun: true,
    });
    w.on('error', (err) => health.failed(err));
    return w;
  };
  // One line per state change of Redis, not one per failed retry; an answer Redis will repeat stops the role.
  const health = watchRedisHealth(opts.connection, { logger: log, display: 'Redis' });
  let worker = makeWorker(opts.concurrency);
  /**
   * A worker whose fetch loop is wedged for good (a command it awaits went down with the old primary)
   * is put aside and a new one takes its place on the same queue: only while it holds no job, once it
   * has stopped fetching (paused); it then closes behind the new one, not forced, so a job it took as
   * it paused keeps its lock and never runs twice. A worker that took a job meanwhile is not wedged:
   * it is resumed and stays.
   */
  let replacing = false;
  /** Replaced workers still closing (close() waits for them). */
  const retiring = new Set<Promise<void>>();
  const replace = async (): Promise<boolean> => {
    if (replacing || running > 0) return false;
    replacing = true;
    try {
      const old = worker;
      await settleWithin(old.pause(true), 2000);
      if (running > 0) {
        old.resume();
        return false;
      }
      // The new worker first (a wedged one's close can hang, and the queue must not wait on it); the old
      // one closes behind it, not forced: a job fetched as it paused is finished (its lock renewed).
      worker = makeWorker(old.concurrency);
      const retired = (async () => {
        const closed = old.close();
        if (!(await settleWithin(closed, 10_000))) {
          if (running > 0) await settleWithin(closed, opts.lockDurationMs);
          await settleWithin(Promise.resolve(old.disconnect()), 1000);
        }
      })();
      retiring.add(retired);
      void retired.finally(() => retiring.delete(retired));
      return true;
    } finally {
      replacing = false;
    }
  };
  const watchdog = new QueueWatchdog({
    worker: () => worker as unknown as Worker, queue: opts.queue, logger: log, stallMs: opts.stallMs,
    waiting: () => readyJobs(opts.connection, opts.prefix, bullName, opts.limiter?.max ?? 0),
    nudge: () => nudgeQueue(opts.connection, opts.prefix, bullName),
    replace,
    running: () => running,
    lastTaken: () => lastTaken,
    onRecovered: (info) => {
      opts.onStall?.(info);
      const last = {
        at: new Date().toISOString(), worker: opts.name ?? null, waiting: info.waiting, stalled_s: Math.round(info.stalledMs / 1000),
        blocking_status: info.blocking?.status ?? null, blocking_nodes: info.blocking?.nodes ?? null,
      };
      recordStall(opts.connection, opts.prefix, opts.queue, last).catch((err) => log.debug({ err: errorMessage(err) }, 'could not record the stall'));
    },
  }).start();
  // After a failover, look at once: the interval alone would take up to its period longer.
  const offBack = health.onBack(() => void watchdog.check());
  let closing: Promise<void> | undefined;
  return {
    get worker() {
      return worker;
    },
    replaceWorker: replace,
    close(graceMs = 5000) {
      closing ??= (async () => {
        watchdog.stop();
        offBack();
        // With Redis away a running job can neither finish nor be handed back: abort at once.
        const grace = health.isUp ? graceMs : 0;
        const timer = setTimeout(() => shutdown.abort(new Error('worker shutting down')), grace);
        try {
          // BullMQ's close waits on Redis (handing jobs back, the blocking fetch): with Redis gone it never
          // resolves. Past the grace and a margin, drop the connections; the jobs this worker held come
          // back through BullMQ's stall recovery once their locks expire.
          const closed = worker.close();
          if (!(await settleWithin(closed, grace + CLOSE_MARGIN_MS))) {
            log.warn({ waited_ms: grace + CLOSE_MARGIN_MS }, 'the worker did not close in time (Redis not answering?): dropping its connections; the jobs it held come back when their locks expire');
            await settleWithin(Promise.resolve(worker.disconnect()), 500);
            await settleWithin(closed, 500);
          }
        } finally {
          clearTimeout(timer);
        }
        await Promise.all([...retiring]);
      })();
      return closing;
    },
  };
}
