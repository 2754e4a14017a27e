/**
 * The job registry: every queue of the fleet, its job data schema, and how to open it.
 *
 * Glossary
 * - task: one BabyVision puzzle, prepared for one benchmark variant (`PreparedTask`).
 * - run: one evaluation of a policy on a benchmark (`run_id`), with its tasks, repeats and output file.
 * - rollout: one attempt of the agent at one task in one repeat; id `<runId>-<taskId>-<repeat>`.
 * - stage: rollout (sandbox-worker) -> judge (judge-worker) -> results (results consumer).
 * - verdict: the judge's `equivalent | different | unsure`; reward 1 only for `equivalent`.
 * - masked: a row that is not a score (`failure_kind` judge_failed or infra_failed), left out of means.
 *
 * Job data is treated as unknown and parsed first thing; a parse failure is a poison job, never
 * retried. Fields are only ever added as optional, since old jobs may still sit in Redis.
 */
import { redisHealthOf } from '../redis/health.ts';
import type { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';
import { z } from 'zod';
import type { Config } from '../config/schema.ts';
import { RowSchema } from '../records/rows.ts';
import { RolloutOutcomeSchema } from '../records/rollout-outcome.ts';

/**
 * Where a rollout's task is read: the run's prepared tasks (`run`, the default) or the task record its
 * request left in Redis (`request`: a rollout of `vcfleet serve`, request-store.ts).
 */
export const TaskSourceSchema = z.enum(['run', 'request']);

export const RolloutJobSchema = z.object({
  v: z.literal(1),
  run_id: z.string().min(1),
  task_id: z.string().min(1),
  repeat: z.number().int().min(0),
  rollout_id: z.string().min(1),
  task_source: TaskSourceSchema.optional(),
});
export type RolloutJob = z.infer<typeof RolloutJobSchema>;

export const JudgeJobSchema = z.object({
  v: z.literal(1),
  run_id: z.string().min(1),
  task_id: z.string().min(1),
  repeat: z.number().int().min(0),
  rollout_id: z.string().min(1),
  /** The rollout's outcome (rollout-outcome.ts; every field but the stop reason defaults, so old jobs still parse). */
  outcome: RolloutOutcomeSchema,
  task_source: TaskSourceSchema.optional(),
  /** Grade by a call to the judge, never from the verdict cache (`vcfleet rejudge --no-cache`), whatever the run's `judge.cache`. */
  no_cache: z.boolean().optional(),
});
export type JudgeJob = z.infer<typeof JudgeJobSchema>;

export const ResultsJobSchema = z.object({
  v: z.literal(1),
  row: RowSchema,
});
export type ResultsJob = z.infer<typeof ResultsJobSchema>;

/** The queue settings of the config that shape job options (`queues.*`). */
export type QueuePolicy = Pick<Config['queues'], 'rollout_attempts' | 'rollout_backoff_ms' | 'judge_attempts' | 'judge_backoff_ms'>;

/** A key of a config section (`judge.concurrency`): a misspelt one is a compile error. */
type SectionKey = { [S in keyof Config]: Config[S] extends Record<string, unknown> ? `${S}.${keyof Config[S] & string}` : never }[keyof Config];

/**
 * One stage of the pipeline, named by its key in `STAGES` (the name of its queue). The process side
 * of a stage (its preflight checks and how its role starts) is in src/workers/roles.ts, by the same name.
 */
interface StageSpec<S extends z.ZodType, R extends string, X extends string | null> {
  /** The role whose workers take the stage's jobs (`vcfleet worker <role>`); its code is src/workers/<role>/. */
  role: R;
  /** The stage its jobs go on to; null for the last. (A job may also skip ahead: an unanswered rollout goes straight to results.) */
  next: X;
  /** The job data, parsed first thing by the stage's worker. */
  schema: S;
  /** The config section of the stage's own settings (config/rollout-sections.ts); null when it has none of its own. */
  section: keyof Config | null;
  /** The config key `vcfleet worker <role> --concurrency` sets. */
  concurrencyKey: SectionKey;
  /** The BullMQ job name of every job of the queue. */
  jobName: string;
  /** The job id of new data (undefined: BullMQ's own). The same id is never added twice. */
  jobId(data: z.output<S>): string | undefined;
  /** Attempts and backoff of a new job. */
  options(policy: QueuePolicy): JobsOptions;
}

/** A stage's spec, typed by its job data (so `jobId` reads it), its role and its next stage. */
function stage<S extends z.ZodType, const R extends string, const X extends string | null>(spec: StageSpec<S, R, X>): StageSpec<S, R, X> {
  return spec;
}

/** Every stage of the fleet, in the order work flows: its queue, role, job contract and where its jobs go next. */
export const STAGES = {
  rollout: stage({
    role: 'sandbox',
    next: 'judge',
    schema: RolloutJobSchema,
    section: 'sandbox_config',
    concurrencyKey: 'queues.rollout_concurrency',
    jobName: 'rollout',
    // One job per rollout: producing a run twice adds nothing twice.
    jobId: (data) => data.rollout_id,
    options: (p) => ({ attempts: p.rollout_attempts, backoff: { type: 'exponential', delay: p.rollout_backoff_ms } }),
  }),
  judge: stage({
    role: 'judge',
    next: 'results',
    schema: JudgeJobSchema,
    section: 'judge',
    concurrencyKey: 'judge.concurrency',
    jobName: 'judge',
    // A new job per grading: a rollout run again after a masked row, or a rejudge, is graded again.
    jobId: (data) => `${data.rollout_id}-judge-${Date.now().toString(36)}${randomBytes(2).toString('hex')}`,
    options: (p) => ({ attempts: p.judge_attempts, backoff: { type: 'exponential', delay: p.judge_backoff_ms } }),
  }),
  results: stage({
    role: 'results',
    next: null,
    schema: ResultsJobSchema,
    section: null,
    // As `vcfleet worker results --concurrency` always did: it sets this key, which the consumer does not read.
    concurrencyKey: 'queues.rollout_concurrency',
    jobName: 'row',
    jobId: () => undefined,
    // Its only failures are the disk and Redis: retry long.
    options: () => ({ attempts: 20, backoff: { type: 'exponential', delay: 1000 } }),
  }),
};

export type QueueName = keyof typeof STAGES;
/** The stages (and their queues) in the order work flows. */
export const QUEUE_NAMES = Object.keys(STAGES) as readonly QueueName[];

export type JobData<N extends QueueName> = z.output<(typeof STAGES)[N]['schema']>;

/** The stage whose jobs stage `name`'s go on to; null for the last. */
export function nextStage(name: QueueName): QueueName | null {
  return STAGES[name].next;
}

/** A value for every stage (failed jobs by queue, jobs requeued by stage). */
export function byStage<T>(value: (name: QueueName) => T): Record<QueueName, T> {
  return Object.fromEntries(QUEUE_NAMES.map((name) => [name, value(name)])) as Record<QueueName, T>;
}

/** Completed jobs are trimmed (their outcome lives on in the rows); failed ones are kept for `retry`. */
const REMOVAL: JobsOptions = { removeOnComplete: { count: 1000 }, removeOnFail: false };

/**
 * Whose queues: `null` for the fleet's shared queues (runs made by `vcfleet produce`, served by every
 * `vcfleet worker`), or a run id for the run's own queues (`vcfleet run` and `demo`: its workers take
 * its jobs only, and `vcfleet worker <role> --run-id ID` joins them).
 */
export type QueueScope = string | null;

/** The BullMQ name of queue `name` in `scope`: `rollout`, or `rollout.<runId>` for a run's own. */
export function bullQueueName(name: QueueName, scope: QueueScope = null): string {
  return scope === null ? name : `${name}.${scope}`;
}

export interface OpenQueueOptions {
  /** Jobs added get the queue's attempts and backoff; a queue opened only to read or move jobs needs none. */
  policy?: QueuePolicy;
  scope?: QueueScope;
}

/** A queue of the fleet. */
export function openQueue<N extends QueueName>(name: N, connection: ConnectionOptions, prefix: string, options: OpenQueueOptions = {}): Queue<JobData<N>> {
  const defaults = { ...REMOVAL, ...(options.policy ? STAGES[name].options(options.policy) : {}) };
  const queue = new Queue<JobData<N>>(bullQueueName(name, options.scope), { connection, prefix, defaultJobOptions: defaults });
  // Without a listener BullMQ prints each connection error with its stack (hundreds while Redis is
  // away); the connection's monitor logs the loss once instead.
  queue.on('error', (err) => redisHealthOf(connection as Redis)?.failed(err));
  return queue;
}

/** Each stage's job contract as a map over the names, so that a generic name reads its own. */
const CONTRACTS: { [N in QueueName]: { jobName: string; jobId(data: JobData<N>): string | undefined } } = STAGES;

function jobOf<N extends QueueName>(name: N, data: JobData<N>) {
  const jobId = CONTRACTS[name].jobId(data);
  return { name: CONTRACTS[name].jobName, data, opts: jobId === undefined ? {} : { jobId } };
}

/** Add one job to queue `name` with its job name and id (attempts and backoff come from `openQueue`'s policy). */
export async function enqueue<N extends QueueName>(name: N, queue: Queue<JobData<N>>, data: JobData<N>): Promise<void> {
  const job = jobOf(name, data);
  // BullMQ types `add` by conditional types it cannot resolve for a generic N; name and data match here.
  await (queue as Queue).add(job.name, job.data, job.opts);
}

/** Add many jobs to queue `name` in one round trip. */
export async function enqueueBulk<N extends QueueName>(name: N, queue: Queue<JobData<N>>, data: readonly JobData<N>[]): Promise<void> {
  await (queue as Queue).addBulk(data.map((d) => jobOf(name, d)));
}

/** A task id as it appears in job ids (BullMQ job ids may not contain `:`). */
export function taskIdForJobs(taskId: string): string {
  return taskId.replace(/[^A-Za-z0-9_.-]/g, '_');
}

/** The rollout (and job) id of a task in one repeat of a run. */
export function rolloutId(runId: string, taskId: string, repeat: number): string {
  return `${runId}-${taskIdForJobs(taskId)}-${repeat}`;
}

/** Parse job data; returns an error message instead of throwing (the adapter decides). */
export function parseJob<N extends QueueName>(
  name: N,
  data: unknown,
): { ok: true; data: JobData<N> } | { ok: false; error: string } {
  const parsed = STAGES[name].schema.safeParse(data);
  if (parsed.success) return { ok: true, data: parsed.data as JobData<N> };
  return { ok: false, error: `malformed ${name} job data: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}` };
}
