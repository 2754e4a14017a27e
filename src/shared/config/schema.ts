/**
 * The schema of the run configuration: every key, its type, default and unit. `load.ts` loads,
 * interpolates and overrides; this file says what is valid. A key wrapped in `runSetting(...)` (here
 * and in the sections) is a run setting: frozen into the run record by `produce` (run-settings.ts).
 */
import { z } from 'zod';
import { envFlag, nullableString, positiveInt, runSetting } from './fields.ts';
import { DashboardSchema, MetricsServerSchema, PreflightSchema, QueuesSchema, RedisSchema, ServeSchema } from './fleet-sections.ts';
import { PricingSchema, ReportSchema } from './report-sections.ts';
import { AgentSchema, JudgeSchema, PolicySchema, SandboxConfigSchema, TranscriptsSchema } from './rollout-sections.ts';

export const BENCHMARKS = ['babyvision_opencode', 'babyvision_opencode_question_only'] as const;
export type BenchmarkName = (typeof BENCHMARKS)[number];

export const ConfigSchema = z
  .object({
    benchmark: runSetting(z.enum(BENCHMARKS).default('babyvision_opencode'), { fixed: true }),
    /** BabyVision has one split: `train` (the parquet's name) and `benchmark` (the reference's) both select it. */
    split: z.enum(['train', 'benchmark'], { message: 'BabyVision has one split: use train (or benchmark, as the reference names it)' }).default('train'),
    /** Where prepared benchmarks live. */
    data_dir: z.string().default('data'),
    reuse_existing_data_preparation: z.boolean().default(true),
    /** BabyVision source parquet (`BABYVISION_PARQUET`); else downloaded from `babyvision.hf_*`. */
    babyvision_parquet: nullableString,
    babyvision: z
      .object({
        hf_repo: z.string().default('UnipatAI/BabyVision'),
        revision: z.string().default('849cbeea2b1d00ad334e9e1e2b49a1960c9ff3f3'),
        file: z.string().default('data/train-00000-of-00001.parquet'),
        endpoint: z.string().default('https://huggingface.co'),
        /** SHA-256 pin of the parquet; null prints a loud warning with the computed hash. */
        sha256: z
          .string()
          .regex(/^[0-9a-f]{64}$/, 'a SHA-256 is 64 lowercase hex digits')
          .nullable()
          .default(null),
      })
      .strict()
      .prefault({}),
    num_repeats: runSetting(positiveInt.default(1), { fixed: true }),
    /** First N tasks only (null: all). */
    limit: runSetting(positiveInt.nullable().default(null), { fixed: true }),
    /** Wall-clock budget of one rollout, in seconds. */
    task_timeout_s: runSetting(positiveInt.default(1800)),
    /** A run's output JSONL; null: `results/<run_id>.jsonl`. Relative paths resolve under `output_root` of the results host. */
    output_jsonl_fpath: nullableString,
    /** Folder under which this results host writes runs' outputs (`VCFLEET_OUTPUT_ROOT`); null: its working folder. */
    output_root: nullableString,
    /** Run id; null makes a new one. Reuse an id to resume a run. */
    run_id: z
      .string()
      .regex(/^[A-Za-z0-9_.-]+$/, 'use letters, digits, "_", "-" or "." (no ":")')
      .nullable()
      .default(null),
    policy_base_url: z.string().url().default('http://127.0.0.1:8000/v1'),
    policy_api_key: nullableString,
    policy_model_name: runSetting(z.string().min(1).default('policy')),
    policy: PolicySchema.prefault({}),
    visual_coding_opencode_judge_base_url: z.string().url().default('https://api.openai.com/v1'),
    visual_coding_opencode_judge_model_name: runSetting(z.string().min(1).default('gpt-4o-mini')),
    judge: JudgeSchema.prefault({}),
    /** Where sandboxes run: a provider of src/sandboxes (`local`, `docker`, `opensandbox`); checked when a worker builds it. */
    sandbox_provider: z.string().regex(/^[a-z][a-z0-9_-]*$/, 'a provider name such as local, docker or opensandbox').default('local'),
    sandbox_config: SandboxConfigSchema.prefault({}),
    sandbox_workdir: z.string().startsWith('/').default('/workspace'),
    /** The sandbox reaches the policy model through the worker's gateway and nothing else; the one mode. */
    sandbox_network_access: z
      .enum(['model_only'], { message: 'model_only is the one network mode (the sandbox reaches the policy model through the gateway, nothing else)' })
      .default('model_only'),
    agent: AgentSchema.prefault({}),
    transcripts: TranscriptsSchema.prefault({}),
    queues: QueuesSchema.prefault({}),
    /** Redis URL (`REDIS_URL`); null lets `vcfleet run` start a private redis-server. */
    redis_url: nullableString,
    redis: RedisSchema.prefault({}),
    /** Folder for the private Redis of `vcfleet run` and other local state. */
    state_dir: z.string().default('.vcfleet'),
    preflight: PreflightSchema.prefault({}),
    metrics_server: MetricsServerSchema.prefault({}),
    dashboard: DashboardSchema.prefault({}),
    /** `vcfleet serve`: the rollout service that speaks NeMo Gym's `/run`. */
    serve: ServeSchema.prefault({}),
    /** Token prices, for a run's `cost_usd` (run settings). */
    pricing: PricingSchema.prefault({}),
    /** The evaluator's report: where the paper's published rows come from. */
    report: ReportSchema.prefault({}),
    log_level: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
    /** Log JSON lines even on a terminal (`VCFLEET_LOG_JSON`). */
    log_json: envFlag.default(false),
    /** Print the stack of an unexpected error (`VCFLEET_DEBUG`). */
    debug: envFlag.default(false),
  })
  .strict();

export type Config = z.infer<typeof ConfigSchema>;

/** Keys whose values are secrets: never logged, never written to Redis or output files. */
export const SECRET_PATHS = ['policy_api_key', 'judge.api_key', 'sandbox_config.api_key', 'dashboard.password', 'dashboard.token', 'redis.sentinel_password'] as const;
