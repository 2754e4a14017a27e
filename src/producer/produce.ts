/**
 * `vcfleet produce`: create a run (id, config snapshot without secrets, totals) and enqueue one rollout
 * job per task per repeat. Producing the same run id again adds nothing twice: the run keeps a set of
 * the rollouts it enqueued.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Config } from '../shared/config/load.ts';
import { runSettingsFrom, settingDifferences, type RunSettings, type SettingDifference } from '../shared/config/run-settings.ts';
import { ConfigError } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { enqueueBulk, openQueue, rolloutId, type RolloutJob } from '../shared/queue/registry.ts';
import { RunStore, runSettings, type RunOrigin, type RunRecord } from '../shared/stores/run-store.ts';
import type { PreparedTask } from '../shared/records/task.ts';
import { waitForReplicas } from '../shared/redis/connect.ts';
import { vcfleetCommand } from '../shared/text/advice.ts';

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
  /**
   * Give a new run queues of its own (`vcfleet run`, `demo`): only workers started for it take its
   * jobs. Default: the fleet's shared queues, served by every `vcfleet worker`.
   */
  ownQueues?: boolean;
  /** What makes the run (kept in its record); default `produce`. */
  origin?: RunOrigin;
}

export interface ProduceResult {
  runId: string;
  total: number;
  /** Rollouts enqueued by this call (0 when the run was produced before). */
  enqueued: number;
  created: boolean;
  /** The run's settings, as frozen in its record. */
  settings: RunSettings;
  /** The run's output path, as its record holds it (the results host resolves it). */
  output: string;
  /** Where this command's run settings differ from those of the run that already existed. */
  differences: SettingDifference[];
}

export function newRunId(benchmark: string, now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-');
  return `${benchmark.replace(/_/g, '-')}-${stamp}-${randomBytes(2).toString('hex')}`;
}

/** Where a new run's rows go: the configured JSONL, or `results/<run id>.jsonl` under the results host's output root. */
export function outputOfNewRun(config: Pick<Config, 'output_jsonl_fpath'>, runId: string): string {
  return config.output_jsonl_fpath ?? `results/${runId}.jsonl`;
}

function runRecord(config: Config, runId: string, tasks: readonly PreparedTask[], ownQueues: boolean, origin: RunOrigin): RunRecord {
  return {
    run_id: runId,
    benchmark: config.benchmark,
    created_at: new Date().toISOString(),
    num_tasks: tasks.length,
    num_repeats: config.num_repeats,
    total: tasks.length * config.num_repeats,
    output_jsonl_fpath: outputOfNewRun(config, runId),
    policy_model: config.policy_model_name,
    judge_model: config.visual_coding_opencode_judge_model_name,
    settings: runSettingsFrom(config),
    queue_scope: ownQueues ? runId : null,
    origin,
    settings_changes: [],
  };
}

export async function produceRun(input: ProduceInput): Promise<ProduceResult> {
  const { config, redis, logger } = input;
  const tasks = config.limit ? input.tasks.slice(0, config.limit) : input.tasks;
  if (tasks.length === 0) throw new ConfigError('no tasks to run: the prepared benchmark is empty or limit is 0');
  const runId = config.run_id ?? newRunId(config.benchmark);
  const store = new RunStore(redis, config.queues.prefix);
  const record = runRecord(config, runId, tasks, input.ownQueues ?? false, input.origin ?? 'produce');
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
  const enqueued = await enqueueRollouts(input, store, run, tasks.map((t) => t.task_id));
  logger.info({ run_id: runId, total: run.total, enqueued, newImages, created }, created ? 'run created' : 'run exists; enqueued what was missing');
  const settings = runSettings(run);
  return { runId, total: run.total, enqueued, created, settings, output: run.output_jsonl_fpath, differences: existing ? settingDifferences(settings, runSettings(record)) : [] };
}

/**
 * Resume a run from what Redis holds (its record and tasks): enqueue the rollouts it lacks. Nothing
 * is prepared or read from disk, so any host can resume any run, demo runs included.
 */
export async function resumeRun(input: Omit<ProduceInput, 'tasks' | 'readImage' | 'ownQueues' | 'origin'> & { runId: string }): Promise<ProduceResult> {
  const store = new RunStore(input.redis, input.config.queues.prefix);
  const run = await store.getRun(input.runId);
  if (!run) throw new ConfigError(`run ${input.runId} does not exist under the prefix ${input.config.queues.prefix} of this Redis; check --run-id, REDIS_URL and queues.prefix (VCFLEET_PREFIX)`);
  const enqueued = await enqueueRollouts(input, store, run, await store.taskIds(run.run_id));
  input.logger.info({ run_id: run.run_id, total: run.total, enqueued }, 'run resumed; enqueued what was missing');
  return { runId: run.run_id, total: run.total, enqueued, created: false, settings: runSettings(run), output: run.output_jsonl_fpath, differences: [] };
}

async function enqueueRollouts(input: Pick<ProduceInput, 'config' | 'redis' | 'onProgress'>, store: RunStore, run: RunRecord, taskIds: readonly string[]): Promise<number> {
  const { config, redis } = input;
  const queue = openQueue('rollout', redis, config.queues.prefix, { policy: config.queues, scope: run.queue_scope });
  const all: RolloutJob[] = [];
  for (let repeat = 0; repeat < run.num_repeats; repeat++) {
    for (const taskId of taskIds) all.push({ v: 1, run_id: run.run_id, task_id: taskId, repeat, rollout_id: rolloutId(run.run_id, taskId, repeat) });
  }
  let enqueued = 0;
  try {
    // The cap on rollouts running at once over all workers of these queues (protects the policy server).
    await queue.setGlobalConcurrency(config.queues.rollout_global_concurrency);
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
  // A failover right after producing would otherwise lose what the old primary had not yet sent on.
  if (enqueued > 0) await waitForReplicas(redis);
  return enqueued;
}

/**
 * The run of a `vcfleet serve` service: made as `produce` makes one, with queues of its own and no
 * prepared task (its tasks come by request, each with its own record), or the existing one of that id
 * (`--run-id`: share or resume it), which must be a service's. Returns the run's record.
 */
export async function createServiceRun(input: Pick<ProduceInput, 'config' | 'redis' | 'logger'>): Promise<{ run: RunRecord; created: boolean }> {
  const planned = await planServiceRun(input);
  return storeServiceRun(input, planned.existing ?? planned.record);
}

/**
 * The service run `createServiceRun` would serve, nothing written yet: the existing run of that id
 * (which must be a service's), or the record a new one gets. So a command decides the run's settings
 * (and passes its preflight) before the run exists.
 */
export async function planServiceRun(input: Pick<ProduceInput, 'config' | 'redis'>): Promise<{ record: RunRecord; existing: RunRecord | null }> {
  const { config, redis } = input;
  const runId = config.run_id ?? `serve-${newRunId(config.benchmark)}`;
  const existing = await new RunStore(redis, config.queues.prefix).getRun(runId);
  if (existing && existing.origin !== 'serve') {
    throw new ConfigError(`run ${runId} was made by \`vcfleet ${existing.origin}\`, not by \`vcfleet serve\`: give serve a new --run-id (${vcfleetCommand('serve --run-id NEW')}), or one a serve made`);
  }
  return { record: existing ?? { ...runRecord(config, runId, [], true, 'serve'), num_repeats: 1 }, existing };
}

/** Store a planned service run (kept as it is when it exists) and cap its queue; returns the stored record. */
export async function storeServiceRun(input: Pick<ProduceInput, 'config' | 'redis' | 'logger'>, record: RunRecord): Promise<{ run: RunRecord; created: boolean }> {
  const { config, redis, logger } = input;
  const store = new RunStore(redis, config.queues.prefix);
  const runId = record.run_id;
  const created = await store.createRun(record);
  const run = (await store.getRun(runId)) ?? record;
  const queue = openQueue('rollout', redis, config.queues.prefix, { scope: run.queue_scope });
  try {
    await queue.setGlobalConcurrency(config.queues.rollout_global_concurrency);
  } finally {
    await queue.close();
  }
  logger.info({ run_id: runId, created }, created ? 'service run created' : 'service run exists: serving it again');
  return { run, created };
}
