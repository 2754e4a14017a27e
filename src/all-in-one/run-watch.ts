/**
 * The progress loop of `vcfleet run`: it watches its own run only (its rows, and the jobs in its own
 * queues or, for a run in the fleet's queues, its jobs there), and ends when every rollout has its
 * row and nothing of the run is in flight, when the run is stopped, stuck, or paused because the
 * policy server fails every call of the first rollouts. It reads Redis through a connection that
 * waits out outages, so a Redis restart pauses the loop, not the run.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Queue } from 'bullmq';
import { errorMessage, InfraError } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { openQueue, QUEUE_NAMES, type JobData, type QueueName } from '../shared/queue/registry.ts';
import type { Redis } from '../shared/redis/connect.ts';
import { policySilenceWarning, type RowTally } from '../shared/output/tally.ts';
import type { RunRecord } from '../shared/stores/run-store.ts';
import { openJobs, readRunJobs } from '../shared/queue/run-jobs.ts';
import type { ProgressView } from './progress.ts';
import type { PaceState } from '../shared/ports/telemetry.ts';
import type { JobEnd } from '../shared/queue/stage-worker.ts';

export type WatchStatus = 'complete' | 'stopped' | 'stuck' | 'paused' | 'redis_lost';

export interface WatchOptions {
  connection: Redis;
  prefix: string;
  run: RunRecord;
  tally: RowTally;
  view: ProgressView;
  logger: Logger;
  signal?: AbortSignal;
  /** The policy endpoint of this host (for messages). */
  policyUrl: string;
  /** Give up when nothing of the run is queued or running for this long and rows are missing (ms). */
  stuckAfterMs: number;
  /** Pause after this many rollout attempts failed on the policy server before any answered call (0: never). */
  failFastAfter: number;
  /** This process's rollout attempts that failed on the policy server. */
  policyFailures: PolicyFailures;
  /** Why this process takes no rollouts now (no memory to spare), or null. */
  held?(): string | null;
  /** Read the tally again (its rows are committed by another process), every couple of seconds. */
  refresh?(): Promise<void>;
  /** This process's pace against the policy endpoint. */
  pace?(): PaceState | null;
  /** End the run (`redis_lost`) once Redis did not answer for this long (ms; `redis.outage_limit_s`). */
  outageLimitMs?: number;
}

/** How long one read of the loop may wait for Redis (its connection waits out outages for ever). */
const READ_WAIT_MS = 5000;

/** `promise`, or an error once `ms` passed without an answer (the loop goes on checking its signal). */
async function answerWithin<T>(promise: Promise<T>, ms: number): Promise<T> {
  promise.catch(() => undefined); // settled after we stopped waiting: nobody listens any more
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`Redis did not answer within ${ms / 1000} s`)), ms)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

export interface WatchResult {
  status: WatchStatus;
  /** Why the run was paused. */
  reason?: string;
}

interface Pending {
  running: number;
  pending: number;
}

/** Jobs of the run not yet ended: its own queues' counts, or its jobs in the fleet's queues. */
async function pendingOf(o: WatchOptions, queues: Array<Queue<JobData<QueueName>>> | null): Promise<Pending> {
  if (queues) {
    const counts = await Promise.all(queues.map((q) => q.getJobCounts('active', 'waiting', 'delayed', 'prioritized')));
    return { running: counts[0].active ?? 0, pending: counts.reduce((n, c) => n + Object.values(c).reduce((a, b) => a + b, 0), 0) };
  }
  const jobs = (await readRunJobs(o.connection, o.prefix, o.run.run_id)).get(o.run.run_id);
  if (!jobs) return { running: 0, pending: 0 };
  return { running: jobs.counts.rollout.active, pending: openJobs(jobs.counts) };
}

/**
 * Rollout attempts of this process that failed on the policy server (their error names it), counted
 * as the sandbox-worker ends them: the evidence for pausing a run whose policy server is down.
 */
export class PolicyFailures {
  count = 0;
  first: string | null = null;
  /** The policy server said the key's quota is gone (`insufficient_quota`): the run pauses at once. */
  quotaGone: string | null = null;

  /** Feed every rollout job's end (the sandbox-worker's onJobEnd): a failure coded `policy_server` (or `policy_quota`) counts. */
  record(outcome: JobEnd, error?: unknown): void {
    if (outcome !== 'failed' || !(error instanceof InfraError)) return;
    if (error.code === 'policy_quota') this.quotaGone ??= errorMessage(error);
    else if (error.code !== 'policy_server') return;
    this.count++;
    this.first ??= errorMessage(error);
  }
}

/**
 * Why to pause the run: the key's quota is gone (at once, whatever was answered before), or the
 * first policy failure's message once `n` rollout attempts failed on the policy server and no call was answered.
 */
function policyDown(failures: PolicyFailures, tally: RowTally, n: number): string | null {
  if (failures.quotaGone !== null) return failures.quotaGone;
  if (n <= 0 || tally.counts.answered_calls > 0 || failures.count < n) return null;
  return failures.first;
}

export async function watchRun(o: WatchOptions): Promise<WatchResult> {
  const own = o.run.queue_scope;
  const queues = own === null ? null : QUEUE_NAMES.map((name) => openQueue(name, o.connection, o.prefix, { scope: own }));
  const rollouts = queues?.[0] as Queue<JobData<'rollout'>> | undefined;
  let idleSince: number | null = null;
  let warned = false;
  let tick = 0;
  // Until first read, the run counts as busy (never complete or stuck before Redis was asked).
  let state: Pending = { running: 0, pending: 1 };
  let unreachableSince: number | null = null;
  try {
    for (;; tick++) {
      if (o.signal?.aborted) return { status: 'stopped' };
      try {
        // A run in the fleet's queues is counted by reading its jobs: every few seconds only.
        if (queues || tick % 10 === 0) state = await answerWithin(pendingOf(o, queues), READ_WAIT_MS);
        if (o.refresh && tick % 4 === 0) await answerWithin(o.refresh(), READ_WAIT_MS);
        unreachableSince = null;
        const down = policyDown(o.policyFailures, o.tally, o.failFastAfter);
        if (down) {
          // Its own queue is paused for every worker of the run; the fleet's shared one is left to other runs.
          await rollouts?.pause();
          return { status: 'paused', reason: down };
        }
      } catch (err) {
        unreachableSince ??= Date.now();
        const gone = Date.now() - unreachableSince;
        if (o.outageLimitMs !== undefined && gone >= o.outageLimitMs) {
          return { status: 'redis_lost', reason: `Redis did not answer for ${Math.round(gone / 1000)} s (redis.outage_limit_s): ${(err as Error).message}` };
        }
        o.logger.warn({ err: (err as Error).message }, 'cannot read the queues (Redis unreachable?); waiting');
        await sleep(1000);
        continue;
      }
      o.view.update({ ...o.tally.counts, total: o.run.total, running: state.running, held: o.held?.() ?? null, pace: o.pace?.() ?? null });
      const silence = warned ? null : policySilenceWarning(o.tally.counts);
      if (silence) {
        warned = true;
        o.logger.warn(`${silence} Policy endpoint: ${o.policyUrl}`);
      }
      if (o.tally.counts.num_rollouts >= o.run.total && state.pending === 0) {
        // Rows another process committed: read once more after the last job ended, so the summary has them all.
        if (o.refresh) await o.refresh().catch((err) => o.logger.warn({ err: (err as Error).message }, 'could not read the last rows'));
        return { status: 'complete' };
      }
      if (state.pending === 0) {
        idleSince ??= Date.now();
        if (Date.now() - idleSince > o.stuckAfterMs) return { status: 'stuck' };
      } else idleSince = null;
      await sleep(500);
    }
  } finally {
    o.view.stop();
    await Promise.allSettled((queues ?? []).map((q) => q.close()));
  }
}
