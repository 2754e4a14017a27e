/**
 * `vcfleet worker results`: the single writer of every run's output JSONL and metrics file. It waits
 * for the writer lock, then commits rows one at a time, and refreshes each run's metrics
 * file at most once a second.
 */
import os from 'node:os';
import { errorMessage } from '../../shared/errors.ts';
import { Releasers } from '../../shared/releasers.ts';
import { fleetKeys } from '../../shared/redis/keys.ts';
import type { Row } from '../../shared/records/rows.ts';
import type { ResultsJob } from '../../shared/queue/registry.ts';
import { RunStore, type RunRecord } from '../../shared/stores/run-store.ts';
import { watchRedisHealth } from '../../shared/redis/health.ts';
import type { ReconcileReport } from '../../shared/stores/reconcile-record.ts';
import { reconcileRun } from './reconcile.ts';
import { startStageWorker, type RoleDeps, type StageWorker } from '../../shared/queue/stage-worker.ts';
import { RunOutput, type CommitResult } from './run-output.ts';
import { resolveOutputPath } from '../../shared/output/output-path.ts';
import { RecordWriter } from './record-writer.ts';
import { WriterLock } from './writer-lock.ts';
import type { TranscriptRecord } from '../../shared/records/transcript.ts';
import type { Trajectory } from '../../shared/records/trajectory.ts';
import { RequestStore } from '../../shared/stores/request-store.ts';
import { deliverResponse } from './request-response.ts';
import { vcfleetCommand } from '../../shared/text/advice.ts';

export interface ResultsWorkerDeps extends RoleDeps<'results'> {
  onCommit?(row: Row, result: CommitResult): void;
  /** Called when the lock is lost to another consumer; default: close. */
  onLockLost?(): void;
  leaseMs?: number;
}

export interface ResultsWorker {
  /** Resolves once this consumer holds the lock and takes jobs (or false if closed while waiting). */
  ready: Promise<boolean>;
  close(graceMs?: number): Promise<void>;
  /** Open (and reconcile) the output of a run now, e.g. after a crash, without waiting for a new row. */
  syncRun(runId: string): Promise<RunOutput>;
  /** Check every open run against what survived in Redis (done by itself each time Redis comes back). */
  reconcileAll(reason: string): Promise<ReconcileReport[]>;
}

/** A run's output on this host: its JSONL and metrics, and the writer of the records kept beside its rows. */
interface OpenRun {
  output: RunOutput;
  run: RunRecord;
  records: RecordWriter;
}

/** A committed row with the records written beside it (for a `vcfleet serve` rollout's response). */
export interface CommittedRow {
  row: Row;
  result: CommitResult;
  transcript: TranscriptRecord | null;
  trajectory: Trajectory | null;
  /** The run's JSONL on this host (its transcripts' images are beside it). */
  jsonlPath: string;
}

/**
 * The results stage: write the row's transcript (from Redis) beside the JSONL, commit the row, tell
 * `onCommitted` (while the parts are still in Redis: a retry after a crash there reads them again),
 * then drop the transcript's parts from Redis. A row delivered twice commits once. A transcript that
 * cannot be read or written never holds the row back: the row is committed without it (and says so in the log).
 */
export async function commitRow(
  data: ResultsJob, run: Pick<OpenRun, 'output' | 'records'>, onCommitted?: (committed: CommittedRow) => Promise<void>,
): Promise<{ row: Row; result: CommitResult }> {
  const { row, pending, transcript, trajectory } = await run.records.attach(data.row);
  const result = await run.output.commit(row);
  await onCommitted?.({ row, result, transcript, trajectory, jsonlPath: run.records.jsonlPath });
  if (pending) await run.records.done(row);
  return { row, result };
}

class ResultsConsumer implements ResultsWorker {
  readonly ready: Promise<boolean>;
  private readonly store: RunStore;
  private readonly requests: RequestStore;
  private readonly lock: WriterLock;
  private readonly runs = new Map<string, Promise<OpenRun>>();
  private readonly stop = new AbortController();
  private stage: StageWorker<'results'> | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private closing: Promise<void> | undefined;
  private reconciling: Promise<unknown> = Promise.resolve();
  private readonly offBack: () => void;

  constructor(private readonly deps: ResultsWorkerDeps) {
    const prefix = deps.config.queues.prefix;
    this.store = new RunStore(deps.connection, prefix);
    this.requests = new RequestStore(deps.connection, prefix);
    this.lock = new WriterLock(deps.connection, fleetKeys(prefix).writerLock(deps.scope ?? null), deps.logger, { leaseMs: deps.leaseMs });
    this.ready = this.start();
    // After a lost Redis (a failover may have lost its last writes): check each open run against what survived.
    const health = watchRedisHealth(deps.connection, { logger: deps.logger, display: 'Redis' });
    this.offBack = health.onBack(() => void this.reconcileAll('redis back'));
  }

  /** Reconcile every run this consumer has open, one pass at a time; returns the reports. */
  reconcileAll(reason: string): Promise<ReconcileReport[]> {
    const next = this.reconciling.then(async () => {
      const reports: ReconcileReport[] = [];
      for (const pending of [...this.runs.values()]) {
        if (this.stop.signal.aborted) break;
        try {
          const { output, run } = await pending;
          reports.push(await reconcileRun({ redis: this.deps.connection, config: this.deps.config, store: this.store, logger: this.deps.logger, restoreRows: () => output.restoreFromFile() }, run, reason));
        } catch (err) {
          this.deps.logger.error({ err: errorMessage(err) }, `could not reconcile a run after the lost Redis; \`${vcfleetCommand('run --run-id <id>')}\` (or \`${vcfleetCommand('produce --run-id <id>')}\`) re-adds what is missing`);
        }
      }
      return reports;
    });
    this.reconciling = next.catch(() => []);
    return next;
  }

  async syncRun(runId: string): Promise<RunOutput> {
    return (await this.open(runId)).output;
  }

  close(graceMs = 10_000): Promise<void> {
    this.closing ??= (async () => {
      this.stop.abort();
      this.offBack();
      clearInterval(this.flushTimer);
      // Newest first: stop taking rows, write each run's metrics, then give the writer lock up.
      const releasers = new Releasers(this.deps.logger);
      releasers.add('release the results writer lock', () => this.lock.release());
      for (const pending of this.runs.values()) {
        releasers.add('write the metrics file at shutdown', async () => {
          // A run whose output could not be opened (its folder unwritable) has nothing to write: its rows are in Redis.
          const open = await pending.catch(() => null);
          await open?.output.close();
        });
      }
      releasers.add('stop the results worker', () => this.stage?.close(graceMs));
      await releasers.release();
    })();
    return this.closing;
  }

  /** Wait for the writer lock, then take jobs. */
  private async start(): Promise<boolean> {
    const { deps } = this;
    const got = await this.lock.acquire(this.stop.signal, () => (deps.onLockLost ? deps.onLockLost() : void this.close(0)));
    if (!got) return false;
    this.stage = startStageWorker({
      queue: 'results',
      connection: deps.connection,
      prefix: deps.config.queues.prefix,
      // Several jobs in hand let BullMQ fetch and complete jobs while a row is written; the writes
      // themselves run one at a time (RunOutput.commit).
      concurrency: deps.config.queues.results_concurrency,
      lockDurationMs: deps.config.queues.lock_duration_ms,
      name: deps.workerName,
      inFlight: deps.inFlight,
      scope: deps.scope ?? null,
      logger: deps.logger,
      onJobEnd: deps.onJobEnd,
      onStall: deps.onStall,
      handle: async (data) => {
        const open = await this.open(data.row.run_id);
        // A `vcfleet serve` run's rows are answers to requests: each one's response goes back to serve through Redis.
        const respond = open.run.origin === 'serve' ? (c: CommittedRow) => deliverResponse(this.requests, c, deps.logger) : undefined;
        const { row, result } = await commitRow(data, open, respond);
        deps.onCommit?.(row, result);
        if (result === 'duplicate') deps.logger.info({ rollout_id: row.rollout_id }, 'duplicate row ignored');
      },
    });
    this.flushTimer = setInterval(() => void this.flush(), 1000);
    deps.logger.info('results consumer is the writer');
    return true;
  }

  /** A run's output, opened (and reconciled with Redis) once. */
  private open(runId: string): Promise<OpenRun> {
    let pending = this.runs.get(runId);
    if (!pending) {
      pending = (async () => {
        const { config, logger } = this.deps;
        const run = await this.store.requireRun(runId);
        const file = resolveOutputPath(runId, run.output_jsonl_fpath, config);
        const output = new RunOutput(run, file, this.store, logger);
        await output.open();
        output.writeMetrics(true);
        // `status` and the dashboard say on which host the file is.
        await this.store.putOutputLocation(runId, { host: os.hostname(), path: file, worker: this.deps.workerName ?? null, at: new Date().toISOString() });
        return { output, run, records: new RecordWriter(file, this.store, logger) };
      })();
      pending.catch(() => this.runs.delete(runId));
      this.runs.set(runId, pending);
    }
    return pending;
  }

  /** Rewrite each run's file when rows were replaced, and its metrics file when its rows changed. */
  private async flush(): Promise<void> {
    for (const pending of this.runs.values()) {
      try {
        const { output } = await pending;
        await output.flush(false);
        output.writeMetrics();
      } catch (err) {
        this.deps.logger.error({ err: (err as Error).message }, 'cannot write the output files (retried next second)');
      }
    }
  }
}

export function startResultsWorker(deps: ResultsWorkerDeps): ResultsWorker {
  return new ResultsConsumer(deps);
}
