/**
 * `vcfleet produce`: create a run (id, config snapshot without secrets, totals) and enqueue one rollout
 * job per task per repeat. Producing the same run id again adds nothing twice: the run keeps a set of
 * the rollouts it enqueued.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Config } from '../shared/config.ts';
import { runSettingsFrom } from '../shared/run-settings.ts';
import { ConfigError } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { enqueueBulk, openQueue, rolloutId, type RolloutJob } from '../shared/queues.ts';
import { RunStore, type RunRecord } from '../shared/run-store.ts';
import type { PreparedTask } from '../shared/task.ts';

export interface ProduceInput {
  config: Config;
  /** A client connection (fails fast). */
  redis: Redis;
  logger: Logger;
  /** The prepared tasks, in order; `limit` is applied here. */
  tasks: readonly PreparedTask[];
  /** Reads a task's image bytes (from the prepared benchmark folder). */
  readImage(task: PreparedTask): Promise<Buffer>;
  /** Called as rollouts are enqueued: (done, total). */
  onProgress?(done: number, total: number): void;
}

export interface ProduceResult {
  runId: string;
  total: number;
  /** Rollouts enqueued by this call (0 when the run was produced before). */
  enqueued: number;
  created: boolean;
}

export function newRunId(benchmark: string, now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-');
  return `${benchmark.replace(/_/g, '-')}-${stamp}-${randomBytes(2).toString('hex')}`;
}

function runRecord(config: Config, runId: string, tasks: readonly PreparedTask[]): RunRecord {
  return {
    run_id: runId,
    benchmark: config.benchmark,
    created_at: new Date().toISOString(),
    num_tasks: tasks.length,
    num_repeats: config.num_repeats,
    total: tasks.length * config.num_repeats,
    output_jsonl_fpath: config.output_jsonl_fpath ?? `results/${runId}.jsonl`,
    policy_model: config.policy_model_name,
    judge_model: config.visual_coding_opencode_judge_model_name,
    settings: runSettingsFrom(config),
  };
}

export async function produceRun(input: ProduceInput): Promise<ProduceResult> {
  const { config, redis, logger } = input;
  const tasks = config.limit ? input.tasks.slice(0, config.limit) : input.tasks;
  if (tasks.length === 0) throw new ConfigError('no tasks to run: the prepared benchmark is empty or limit is 0');
  const runId = config.run_id ?? newRunId(config.benchmark);
  const store = new RunStore(redis, config.queues.prefix);
  const record = runRecord(config, runId, tasks);
  const existing = await store.getRun(runId);
  if (existing && (existing.total !== record.total || existing.benchmark !== record.benchmark)) {
    throw new ConfigError(
      `run ${runId} already exists with ${existing.total} rollouts of ${existing.benchmark}, not ${record.total} of ${record.benchmark}; ` +
        'use a new run_id, or the same benchmark, limit and num_repeats to resume it',
    );
  }
  const created = existing ? false : await store.createRun(record);
  const run = existing ?? record;
  await store.putTasks(runId, tasks);
  let newImages = 0;
  for (const task of tasks) {
    if (await store.hasBlob(task.image_sha256)) continue;
    if (await store.putBlob(task.image_sha256, await input.readImage(task))) newImages++;
  }
  const enqueued = await enqueueRollouts(input, store, run, tasks);
  logger.info({ run: runId, total: run.total, enqueued, newImages, created }, created ? 'run created' : 'run exists; enqueued what was missing');
  return { runId, total: run.total, enqueued, created };
}

async function enqueueRollouts(input: ProduceInput, store: RunStore, run: RunRecord, tasks: readonly PreparedTask[]): Promise<number> {
  const { config, redis } = input;
  const queue = openQueue('rollout', redis, config.queues.prefix, config.queues);
  const all: RolloutJob[] = [];
  for (let repeat = 0; repeat < run.num_repeats; repeat++) {
    for (const task of tasks) all.push({ v: 1, run_id: run.run_id, task_id: task.task_id, repeat, rollout_id: rolloutId(run.run_id, task.task_id, repeat) });
  }
  let enqueued = 0;
  try {
    for (let i = 0; i < all.length; i += 500) {
      const chunk = all.slice(i, i + 500);
      const seen = await redis.smismember(store.keys.enqueued(run.run_id), ...chunk.map((j) => j.rollout_id));
      const fresh = chunk.filter((_, k) => seen[k] === 0);
      if (fresh.length > 0) {
        await enqueueBulk('rollout', queue, fresh);
        // Recorded after the add: a crash in between re-adds under the same job id, which BullMQ ignores.
        await redis.sadd(store.keys.enqueued(run.run_id), ...fresh.map((j) => j.rollout_id));
        enqueued += fresh.length;
      }
      input.onProgress?.(Math.min(i + 500, all.length), all.length);
    }
  } finally {
    await queue.close();
  }
  return enqueued;
}
