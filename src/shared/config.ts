/**
 * The run configuration: one YAML file, `${env:VAR,default}` interpolation, `++key=value` overrides,
 * one zod schema with every default filled. This is the only module that reads `process.env`.
 */
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { z } from 'zod';
import { ConfigError } from './errors.ts';

export const BENCHMARKS = ['babyvision_opencode', 'babyvision_opencode_question_only'] as const;
export type BenchmarkName = (typeof BENCHMARKS)[number];

const positiveInt = z.number().int().positive();
const nullableString = z.string().nullable().default(null);

const SandboxConfigSchema = z
  .object({
    /** Image for the `opensandbox` provider (`VISUAL_CODING_OPENCODE_SANDBOX_IMAGE`). */
    image: z.string().default('visual-coding-fleet-sandbox:latest'),
    /** Lifetime of a remote sandbox in seconds; it is destroyed earlier when the task ends. */
    ttl_s: positiveInt.default(7200),
    resources: z
      .object({ cpu: z.number().positive().default(2), memory_mib: positiveInt.default(8192) })
      .strict()
      .default({ cpu: 2, memory_mib: 8192 }),
    /** OpenSandbox server (`OPENSANDBOX_DOMAIN`), e.g. `http://opensandbox.internal:8080`. */
    domain: nullableString,
    /** OpenSandbox API key (`OPENSANDBOX_API_KEY`); a secret. */
    api_key: nullableString,
    /** Host name the sandbox uses to reach the worker's gateway (opensandbox only). */
    gateway_host: nullableString,
  })
  .strict();

const PolicySchema = z
  .object({
    /** Context window declared to OpenCode, in tokens. */
    context_window: positiveInt.default(128000),
    /** Output cap per model call, in tokens. */
    max_output_tokens: positiveInt.default(32768),
    /** Whole-request timeout for one model call, in seconds. */
    request_timeout_s: positiveInt.default(600),
    /** Store every policy call's request and response beside the rollout (for RL training). */
    capture: z.boolean().default(false),
  })
  .strict();

const JudgeSchema = z
  .object({
    /** Judge API key (`OPENAI_API_KEY`); a secret, never written anywhere. */
    api_key: nullableString,
    /** Timeout of one judge call, in seconds. */
    timeout_s: z.number().positive().default(60),
    /** Retries of one judge call (429, 5xx, timeouts, connection errors) before the row is masked. */
    max_retries: z.number().int().min(0).default(4),
    /** Base of the exponential backoff between retries, in milliseconds. */
    backoff_base_ms: positiveInt.default(1000),
    /** Longest wait between retries, in milliseconds (a Retry-After header may ask for more, up to 60 s). */
    backoff_max_ms: positiveInt.default(30000),
    /** Fleet-wide judge requests per second (BullMQ limiter). */
    rate_limit_per_s: z.number().positive().default(10),
    /** Judge calls in flight per judge-worker process. */
    concurrency: positiveInt.default(8),
    /** Cache verdicts by judge model and prompt, so repeats and rejudges never pay twice. */
    cache: z.boolean().default(true),
    temperature: z.number().min(0).default(0),
    max_tokens: positiveInt.default(1024),
  })
  .strict();

const AgentSchema = z
  .object({
    /** `opencode`: the real agent in a sandbox. `scripted`: answers from `script_path` (tests, benchmarks). */
    kind: z.enum(['opencode', 'scripted']).default('opencode'),
    /** Path to the OpenCode binary; default: the one installed from npm with this project. */
    opencode_bin: nullableString,
    /** Stop the session after this many tool calls (OpenCode has no limit of its own). */
    max_tool_calls: positiveInt.default(200),
    /** For `kind: scripted`: a JSON file mapping task ids (or `*`) to scripted outcomes. */
    script_path: nullableString,
  })
  .strict();

const QueuesSchema = z
  .object({
    /** Redis key prefix of every queue and record of the fleet. */
    prefix: z
      .string()
      .regex(/^[A-Za-z0-9_.-]+$/, 'use letters, digits, "_", "-" or "."')
      .default('vcfleet'),
    /** Rollouts a sandbox-worker process runs at once. */
    rollout_concurrency: positiveInt.default(2),
    /** Rollouts running at once across the whole fleet (BullMQ global concurrency). */
    rollout_global_concurrency: positiveInt.default(32),
    /** Attempts of a rollout on infrastructure errors before it is masked as infra_failed. */
    rollout_attempts: positiveInt.default(3),
    /** Base of the exponential backoff between rollout attempts, in milliseconds. */
    rollout_backoff_ms: positiveInt.default(5000),
    /** Attempts of a judge job (each attempt already retries the call `judge.max_retries` times). */
    judge_attempts: positiveInt.default(2),
    /** How long a job lock lives without renewal before a stalled job is taken by another worker (ms). */
    lock_duration_ms: positiveInt.default(30000),
  })
  .strict();

const MetricsServerSchema = z
  .object({
    /** Port of the Prometheus `/metrics` endpoint of long-running roles; 0 turns it off. */
    port: z.number().int().min(0).max(65535).default(0),
    host: z.string().default('127.0.0.1'),
  })
  .strict();

const DashboardSchema = z
  .object({
    /** Address `vcfleet dashboard` binds; anything but 127.0.0.1, ::1 or localhost requires credentials. */
    host: z.string().default('127.0.0.1'),
    /** Port of the dashboard (0: any free port, printed at start). */
    port: z.number().int().min(0).max(65535).default(3000),
    /** Refuse every state-changing request (HTTP 403) and show Bull Board read-only. */
    read_only: z.boolean().default(false),
    /** Basic-auth user (`VCFLEET_DASHBOARD_USER`); needs `password`. */
    user: nullableString,
    /** Basic-auth password (`VCFLEET_DASHBOARD_PASSWORD`); a secret. */
    password: nullableString,
    /** Bearer token (`VCFLEET_DASHBOARD_TOKEN`), accepted instead of basic auth; a secret. */
    token: nullableString,
    /** Most recent runs shown on the run overview. */
    max_runs: positiveInt.default(50),
  })
  .strict();

export const ConfigSchema = z
  .object({
    benchmark: z.enum(BENCHMARKS).default('babyvision_opencode'),
    split: z.string().default('train'),
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
    /** First N tasks only (null: all). */
    limit: positiveInt.nullable().default(null),
    num_repeats: positiveInt.default(1),
    /** Wall-clock budget of one rollout, in seconds. */
    task_timeout_s: positiveInt.default(1800),
    output_jsonl_fpath: z.string().default('results/babyvision_opencode.jsonl'),
    /** Run id; null makes a new one. Reuse an id to resume a run. */
    run_id: z
      .string()
      .regex(/^[A-Za-z0-9_.-]+$/, 'use letters, digits, "_", "-" or "." (no ":")')
      .nullable()
      .default(null),
    policy_base_url: z.string().url().default('http://127.0.0.1:8000/v1'),
    policy_api_key: nullableString,
    policy_model_name: z.string().min(1).default('policy'),
    policy: PolicySchema.prefault({}),
    visual_coding_opencode_judge_base_url: z.string().url().default('https://api.openai.com/v1'),
    visual_coding_opencode_judge_model_name: z.string().min(1).default('gpt-4o-mini'),
    judge: JudgeSchema.prefault({}),
    sandbox_provider: z.enum(['local', 'opensandbox']).default('local'),
    sandbox_config: SandboxConfigSchema.prefault({}),
    sandbox_workdir: z.string().startsWith('/').default('/workspace'),
    sandbox_network_access: z.enum(['model_only']).default('model_only'),
    agent: AgentSchema.prefault({}),
    queues: QueuesSchema.prefault({}),
    /** Redis URL (`REDIS_URL`); null lets `vcfleet run` start a private redis-server. */
    redis_url: nullableString,
    /** Folder for the private Redis of `vcfleet run` and other local state. */
    state_dir: z.string().default('.vcfleet'),
    metrics_server: MetricsServerSchema.prefault({}),
    dashboard: DashboardSchema.prefault({}),
    log_level: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  })
  .strict();

export type Config = z.infer<typeof ConfigSchema>;

/** Keys whose values are secrets: never logged, never written to Redis or output files. */
export const SECRET_PATHS = ['policy_api_key', 'judge.api_key', 'sandbox_config.api_key', 'dashboard.password', 'dashboard.token'] as const;

export const DEFAULT_CONFIG_PATH = fileURLToPath(
  new URL('../../configs/visual_coding_opencode.yaml', import.meta.url),
);

type Provenance = Map<string, string>;

const ENV_PATTERN = /\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?:,([^}]*))?\}/g;

/** Replace `${env:VAR,default}` in every string; a whole-value reference keeps the YAML type of its value. */
function interpolate(value: unknown, at: string, file: string, env: NodeJS.ProcessEnv, prov: Provenance): unknown {
  if (typeof value === 'string') {
    const whole = /^\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?:,([^}]*))?\}$/.exec(value);
    if (whole) {
      const [, name, fallback] = whole;
      const set = env[name] !== undefined && env[name] !== '';
      prov.set(at, set ? `environment variable ${name} (via ${file})` : `default of \${env:${name}} in ${file}`);
      const raw = set ? env[name]! : fallback;
      if (raw === undefined) return null;
      return parseScalar(raw.trim());
    }
    if (ENV_PATTERN.test(value)) {
      ENV_PATTERN.lastIndex = 0;
      prov.set(at, `${file} with environment variables`);
      return value.replace(ENV_PATTERN, (_m, name: string, fallback?: string) => env[name] || fallback || '');
    }
    return value;
  }
  if (Array.isArray(value)) return value.map((v, i) => interpolate(v, `${at}.${i}`, file, env, prov));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const key = at ? `${at}.${k}` : k;
      if (!prov.has(key)) prov.set(key, file);
      out[k] = interpolate(v, key, file, env, prov);
    }
    return out;
  }
  return value;
}

/** A command-line value is read as a YAML scalar: `3` is a number, `true` a boolean, `null` null. */
function parseScalar(raw: string): unknown {
  if (raw === '') return '';
  try {
    const value = YAML.parse(raw);
    // A long run of digits (a hash, an id) is text: as a number it would lose its digits.
    if (typeof value === 'number' && !Number.isSafeInteger(value) && /^\d+$/.test(raw)) return raw;
    return value;
  } catch {
    return raw;
  }
}

function setPath(target: Record<string, unknown>, dotted: string, value: unknown): void {
  const parts = dotted.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    if (!next || typeof next !== 'object' || Array.isArray(next)) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts[parts.length - 1]] = value;
}

/** Split `++key=value` arguments from the rest. */
export function splitOverrides(argv: readonly string[]): { overrides: string[]; rest: string[] } {
  const overrides: string[] = [];
  const rest: string[] = [];
  for (const arg of argv) (arg.startsWith('++') ? overrides : rest).push(arg);
  return { overrides, rest };
}

/** Environment variables the reference's users set, mapped to config keys; they apply when the YAML leaves the key unset. */
const ENV_KEYS: ReadonlyArray<[string, string]> = [
  ['POLICY_BASE_URL', 'policy_base_url'],
  ['POLICY_API_KEY', 'policy_api_key'],
  ['POLICY_MODEL', 'policy_model_name'],
  ['OPENAI_API_KEY', 'judge.api_key'],
  ['BABYVISION_PARQUET', 'babyvision_parquet'],
  ['VISUAL_CODING_OPENCODE_SANDBOX_IMAGE', 'sandbox_config.image'],
  ['OPENSANDBOX_DOMAIN', 'sandbox_config.domain'],
  ['OPENSANDBOX_API_KEY', 'sandbox_config.api_key'],
  ['REDIS_URL', 'redis_url'],
];

function getPath(obj: unknown, dotted: string): unknown {
  let node: unknown = obj;
  for (const part of dotted.split('.')) {
    if (!node || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

export interface LoadConfigOptions {
  /** YAML file; default `configs/visual_coding_opencode.yaml` of this package. */
  configPath?: string;
  /** `++key=value` strings, applied last. */
  overrides?: readonly string[];
  /** Extra values set by command flags (e.g. `--benchmark`), applied before `++` overrides. */
  flags?: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
}

/** Load, interpolate, override and validate the configuration. Throws ConfigError naming the key and its source. */
export function loadConfig(options: LoadConfigOptions = {}): Config {
  const env = options.env ?? process.env;
  const file = options.configPath ?? env.VCFLEET_CONFIG ?? DEFAULT_CONFIG_PATH;
  const prov: Provenance = new Map();
  let raw: unknown = {};
  if (!existsSync(file)) {
    throw new ConfigError(`config file ${file} does not exist; pass --config PATH or set VCFLEET_CONFIG`);
  }
  try {
    raw = YAML.parse(readFileSync(file, 'utf8')) ?? {};
  } catch (err) {
    throw new ConfigError(`config file ${file} is not valid YAML: ${(err as Error).message}`);
  }
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ConfigError(`config file ${file} must hold a mapping of keys to values`);
  }
  const doc = interpolate(raw, '', path.relative(process.cwd(), file) || file, env, prov) as Record<string, unknown>;
  for (const [name, key] of ENV_KEYS) {
    const value = env[name];
    if (value !== undefined && value !== '' && (getPath(doc, key) === undefined || getPath(doc, key) === null)) {
      setPath(doc, key, value);
      prov.set(key, `environment variable ${name}`);
    }
  }
  for (const [key, value] of Object.entries(options.flags ?? {})) {
    if (value === undefined) continue;
    setPath(doc, key, value);
    prov.set(key, `command-line flag for ${key}`);
  }
  for (const arg of options.overrides ?? []) {
    const body = arg.replace(/^\+\+/, '');
    const eq = body.indexOf('=');
    if (eq <= 0) throw new ConfigError(`override "${arg}" must look like ++key=value (dotted keys for nested settings)`);
    const key = body.slice(0, eq);
    if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/.test(key)) {
      throw new ConfigError(`override "${arg}": "${key}" is not a config key`);
    }
    setPath(doc, key, parseScalar(body.slice(eq + 1)));
    prov.set(key, `command line ${key.includes('api_key') || (SECRET_PATHS as readonly string[]).includes(key) ? `++${key}=***` : arg}`);
  }
  const parsed = ConfigSchema.safeParse(doc);
  if (!parsed.success) throw new ConfigError(describeIssues(parsed.error, prov, file));
  return parsed.data;
}

function describeIssues(error: z.ZodError, prov: Provenance, file: string): string {
  const lines = error.issues.map((issue) => {
    const keys = issue.code === 'unrecognized_keys' ? issue.keys.map((k) => [...issue.path, k].join('.')) : [];
    const key = issue.path.join('.');
    if (keys.length > 0) {
      return keys
        .map((k) => `unknown config key "${k}" (from ${findSource(prov, k) ?? file}); check its spelling against ${DEFAULT_CONFIG_PATH}`)
        .join('\n');
    }
    const source = findSource(prov, key) ?? 'the built-in default';
    return `config key "${key}": ${issue.message} (value from ${source})`;
  });
  return `invalid configuration:\n  ${lines.join('\n  ')}`;
}

function findSource(prov: Provenance, key: string): string | undefined {
  for (let parts = key.split('.'); parts.length > 0; parts = parts.slice(0, -1)) {
    const hit = prov.get(parts.join('.'));
    if (hit) return hit;
  }
  return undefined;
}

/** The config with every secret removed, safe to store in Redis or print. */
export function redactConfig(config: Config): Config {
  const copy = structuredClone(config);
  for (const key of SECRET_PATHS) {
    if (getPath(copy, key)) setPath(copy as unknown as Record<string, unknown>, key, '***');
  }
  return copy;
}

/** Every secret value in the config (for scrubbing logs and checking outputs). */
export function secretValues(config: Config): string[] {
  return SECRET_PATHS.map((key) => getPath(config, key)).filter((v): v is string => typeof v === 'string' && v.length > 0);
}
