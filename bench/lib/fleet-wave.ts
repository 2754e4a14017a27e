/**
 * Real rollouts through the fleet for the capacity benchmark: a `vcfleet worker sandbox` OS process
 * running the real OpenCode in `local` sandboxes against a scripted policy server, the judge-worker
 * (no-op judge) and the results consumer in this process. A wave produces a run of `count` copies of
 * the bench task and waits for every row; its makespan runs from the first enqueue to the last row
 * written. The sessions' memory is watched meanwhile (each bwrap child of the worker is a session).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { produceRun } from '../../src/producer/produce.ts';
import { createRedis } from '../../src/shared/redis/connect.ts';
import type { Row } from '../../src/shared/records/rows.ts';
import type { PreparedTask } from '../../src/shared/records/task.ts';
import { createHash } from 'node:crypto';
import { startJudgeWorker } from '../../src/workers/judge/worker.ts';
import { startResultsWorker } from '../../src/workers/results/worker.ts';
import { benchConfig, benchPrefix, deferred, deletePrefix, discardLogger, noopJudge } from './fleet.ts';
import { MemoryWatch, type HostMemory, type MemoryReport } from './memory.ts';
import { IMAGE, KEY, MODEL, POLICY, PROMPT } from './opencode-session.ts';
import { startSandboxProcess, type WorkerProcess } from './sandbox-worker.ts';

const IMAGE_SHA = createHash('sha256').update(IMAGE).digest('hex');

/** `count` copies of the bench task (the same prompt and image as the bare `opencode run`s). */
export function benchTasks(count: number, tag: string): PreparedTask[] {
  return Array.from({ length: count }, (_, i): PreparedTask => ({
    task_id: `${tag}-${String(i + 1).padStart(3, '0')}`, benchmark: 'babyvision_opencode', prompt: PROMPT, question: 'Which half is red?', gold: 'A',
    type: 'Fine-grained Discrimination', subtype: 'x', ans_type: 'choice', options: ['left', 'right'],
    image_sha256: IMAGE_SHA, image_mime: 'image/png', image_file: `images/${IMAGE_SHA}.png`,
  }));
}

export interface FleetOptions {
  redisUrl: string;
  dir: string;
  policyUrl: string;
  /** `--concurrency` of the worker; 'auto' passes `++queues.rollout_concurrency=auto` instead. */
  concurrency: number | 'auto';
  /** `sandbox_config.resources.memory_mib`; default the config's. */
  memoryMib?: number;
  /** `queues.rollout_global_concurrency`; default the larger of 32 and a fixed concurrency. */
  globalCap?: number;
  /** Extra `++key=value` of the worker and the producer. */
  overrides?: string[];
}

export interface WaveResult {
  makespanS: number;
  rows: Row[];
  memory: MemoryReport;
  /** Seconds from each rollout's start (as its transcript has it) to its first policy call. */
  firstCallS: number[];
  /** Why the wave was stopped before its last row, or null. */
  stopped: string | null;
}

/** One sandbox-worker process and the in-process judge and results roles, for several waves. */
export class Fleet {
  private readonly prefix = benchPrefix('capacity');
  private readonly overrides: string[];
  private readonly client: Redis;
  private readonly connection: Redis;
  private worker: WorkerProcess | null = null;
  private judge: Awaited<ReturnType<typeof startJudgeWorker>> | null = null;
  private results: ReturnType<typeof startResultsWorker> | null = null;
  private onRow: ((row: Row) => void) | null = null;
  readonly outputPath: string;

  constructor(private readonly opts: FleetOptions) {
    this.outputPath = path.join(opts.dir, `${this.prefix}.jsonl`);
    this.overrides = [
      `++redis_url=${opts.redisUrl}`,
      `++queues.prefix=${this.prefix}`,
      '++agent.kind=opencode',
      `++policy_base_url=${opts.policyUrl}`,
      `++policy_model_name=${MODEL}`,
      `++policy_api_key=${KEY}`,
      `++policy.context_window=${POLICY.contextWindow}`,
      `++policy.max_output_tokens=${POLICY.maxOutputTokens}`,
      `++policy.request_timeout_s=${POLICY.requestTimeoutS}`,
      `++queues.rollout_global_concurrency=${opts.globalCap ?? Math.max(32, typeof opts.concurrency === 'number' ? opts.concurrency : 0)}`,
      `++output_jsonl_fpath=${this.outputPath}`,
      ...(opts.concurrency === 'auto' ? ['++queues.rollout_concurrency=auto'] : []),
      ...(opts.memoryMib ? [`++sandbox_config.resources.memory_mib=${opts.memoryMib}`] : []),
      ...(opts.overrides ?? []),
    ];
    this.client = createRedis(opts.redisUrl, 'client');
    this.connection = createRedis(opts.redisUrl, 'worker');
  }

  get workerPid(): number {
    return this.worker?.child.pid ?? -1;
  }

  async start(): Promise<void> {
    const config = benchConfig({ redisUrl: this.opts.redisUrl, dir: this.opts.dir, overrides: this.overrides }, this.prefix);
    const logger = discardLogger('info');
    this.results = startResultsWorker({ config, connection: this.connection, logger, onCommit: (row) => this.onRow?.(row) });
    await this.results.ready;
    this.judge = await startJudgeWorker({ config, connection: this.connection, logger, judge: noopJudge });
    this.worker = startSandboxProcess(this.overrides, typeof this.opts.concurrency === 'number' ? this.opts.concurrency : undefined);
    await this.worker.ready;
  }

  /** Produces `count` rollouts and waits for their rows (or for `stop` to be called). */
  async wave(count: number, tag: string, watch: { onSample?(host: HostMemory, totalKib: number, stop: (why: string) => void): void } = {}): Promise<WaveResult> {
    const config = benchConfig({ redisUrl: this.opts.redisUrl, dir: this.opts.dir, overrides: this.overrides }, this.prefix);
    const rows: Row[] = [];
    const done = deferred<string | null>();
    this.onRow = (row) => {
      rows.push(row);
      if (rows.length === count) done.resolve(null);
    };
    const exited = this.worker!.exited.then((code) => `the sandbox-worker exited (${code}): ${this.worker!.output().slice(-600)}`);
    const memory = new MemoryWatch({
      parents: () => [this.workerPid],
      sessionMatch: /bwrap/,
      onSample: (host, total) => watch.onSample?.(host, total, (why) => done.resolve(why)),
    });
    const t0 = performance.now();
    await produceRun({ config, redis: this.client, logger: discardLogger('warn'), tasks: benchTasks(count, tag), readImage: async () => IMAGE });
    const stopped = await Promise.race([done.promise, exited]);
    const makespanS = (performance.now() - t0) / 1000;
    const report = memory.stop();
    this.onRow = null;
    return { makespanS, rows, memory: report, firstCallS: rows.map((r) => this.firstCallS(r)).filter(Number.isFinite), stopped };
  }

  /** From the rollout's transcript: its start to its first policy call, in seconds. */
  private firstCallS(row: Row): number {
    if (!row.transcript) return Number.NaN;
    try {
      const t = JSON.parse(readFileSync(path.resolve(path.dirname(this.outputPath), row.transcript), 'utf8')) as { started_at: string; turns: Array<{ started_at: string }> };
      return t.turns.length ? (Date.parse(t.turns[0].started_at) - Date.parse(t.started_at)) / 1000 : Number.NaN;
    } catch {
      return Number.NaN;
    }
  }

  /** Stops the worker (SIGTERM: it hands its jobs back and destroys its sandboxes) and the in-process roles. */
  async close(): Promise<void> {
    if (this.worker && this.worker.child.exitCode === null) {
      this.worker.child.kill('SIGTERM');
      await this.worker.exited;
    }
    await this.judge?.close(1000);
    await this.results?.close(1000);
    await deletePrefix(this.client, this.prefix);
    this.client.disconnect();
    this.connection.disconnect();
  }
}
