/**
 * `vcfleet worker results`: the single writer of every run's output JSONL and metrics file. It waits
 * for the writer lock, then commits rows one at a time, and refreshes each run's metrics
 * file at most once a second.
 */
import type { Redis } from 'ioredis';
import type { Config } from '../../shared/config.ts';
import { fleetKeys } from '../../shared/keys.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Row } from '../../shared/rows.ts';
import { RunStore } from '../../shared/run-store.ts';
import { startStageWorker, type StageWorker, type StageWorkerOptions } from '../../shared/stage-worker.ts';
import { RunOutput, type CommitResult } from './run-output.ts';
import { resolveOutputPath } from './output-path.ts';
import { TranscriptWriter } from './transcript-writer.ts';
import { WriterLock } from './writer-lock.ts';

export interface ResultsWorkerDeps {
  /** This worker's registry id (worker-registry.ts), stored by BullMQ on the jobs it takes. */
  workerName?: string;
  config: Config;
  connection: Redis;
  logger: Logger;
  onJobEnd?: StageWorkerOptions<'results'>['onJobEnd'];
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
}

export function startResultsWorker(deps: ResultsWorkerDeps): ResultsWorker {
  const { config, connection, logger } = deps;
  const prefix = config.queues.prefix;
  const store = new RunStore(connection, prefix);
  const lock = new WriterLock(connection, fleetKeys(prefix).writerLock(), logger, { leaseMs: deps.leaseMs });
  const outputs = new Map<string, Promise<RunOutput>>();
  const transcripts = new Map<string, TranscriptWriter>();
  const stop = new AbortController();
  let stage: StageWorker | undefined;
  let flushTimer: NodeJS.Timeout | undefined;

  const outputFor = (runId: string): Promise<RunOutput> => {
    let pending = outputs.get(runId);
    if (!pending) {
      pending = (async () => {
        const run = await store.requireRun(runId);
        const file = resolveOutputPath(runId, run.output_jsonl_fpath, config);
        const out = new RunOutput(runId, file, store, run.num_repeats, logger);
        await out.open();
        transcripts.set(runId, new TranscriptWriter(file, store, logger));
        out.writeMetrics(true);
        return out;
      })();
      pending.catch(() => outputs.delete(runId));
      outputs.set(runId, pending);
    }
    return pending;
  };

  const flush = async () => {
    for (const pending of outputs.values()) {
      try {
        (await pending).writeMetrics();
      } catch (err) {
        logger.error({ err: (err as Error).message }, 'cannot write the metrics file');
      }
    }
  };

  let closing: Promise<void> | undefined;
  const close = (graceMs = 10_000): Promise<void> => {
    closing ??= (async () => {
      stop.abort();
      clearInterval(flushTimer);
      await stage?.close(graceMs);
      for (const pending of outputs.values()) {
        try {
          (await pending).close();
        } catch (err) {
          logger.error({ err: (err as Error).message }, 'cannot write the metrics file at shutdown');
        }
      }
      await lock.release();
    })();
    return closing;
  };

  const ready = (async () => {
    const got = await lock.acquire(stop.signal, () => (deps.onLockLost ? deps.onLockLost() : void close(0)));
    if (!got) return false;
    stage = startStageWorker({
      queue: 'results',
      connection,
      prefix,
      // Several jobs in hand let BullMQ fetch and complete jobs while a row is written; the writes
      // themselves run one at a time (RunOutput.commit).
      concurrency: config.queues.results_concurrency,
      lockDurationMs: config.queues.lock_duration_ms,
      name: deps.workerName,
      logger,
      onJobEnd: deps.onJobEnd,
      async handle(data) {
        const out = await outputFor(data.row.run_id);
        const writer = transcripts.get(data.row.run_id)!;
        const { row, pending } = await writer.attach(data.row);
        const result = await out.commit(row);
        if (pending) await writer.done(row);
        deps.onCommit?.(row, result);
        if (result === 'duplicate') logger.info({ rollout: row.rollout_id }, 'duplicate row ignored');
      },
    });
    flushTimer = setInterval(() => void flush(), 1000);
    logger.info('results consumer is the writer');
    return true;
  })();

  return { ready, close, syncRun: outputFor };
}
