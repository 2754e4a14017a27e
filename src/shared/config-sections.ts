/**
 * The sections of the configuration (config-schema.ts puts them together): sandboxes, the policy and
 * its gateway, transcripts, the judge, the agent, queues, preflight, Redis, metrics and dashboard.
 * Each key documents itself; configs/visual_coding_opencode.yaml shows them all.
 */
import { z } from 'zod';

export const positiveInt = z.number().int().positive();
export const nullableString = z.string().nullable().default(null);
/** A switch that may come from an environment variable: true/false, or 1/0. */
export const envFlag = z.union([z.boolean(), z.literal(0), z.literal(1)]).transform((v) => v === true || v === 1);

export const SandboxConfigSchema = z
  .object({
    /** Sandbox image of the `opensandbox` and `docker` providers (`VISUAL_CODING_OPENCODE_SANDBOX_IMAGE`). */
    image: z.string().default('visual-coding-fleet-sandbox:latest'),
    /** Lifetime of a remote sandbox in seconds (at least 60: an OpenSandbox server refuses less); it is destroyed earlier when the task ends. */
    ttl_s: z.number().int().min(60, 'at least 60 (an OpenSandbox server refuses a shorter sandbox TTL)').default(7200),
    /**
     * Limits of every sandbox. `opensandbox` passes `cpu` and `memory_mib` to the server; `local`
     * enforces all four itself (cgroup, tmpfs, rlimits; see local-bwrap.ts).
     */
    resources: z
      .object({
        /** CPUs a sandbox may use at once; fractions allowed (cgroup `cpu.max`). */
        cpu: z.number().positive().default(2),
        /** Memory of everything run in a sandbox, its /tmp and workspace files included, in MiB; no swap. */
        memory_mib: positiveInt.default(8192),
        /** Processes and threads alive at once in a sandbox (cgroup `pids.max`; `local` only). */
        pids: positiveInt.default(1024),
        /** Disk of a sandbox (workspace, /tmp and /dev/shm together, also the largest file), in MiB (`local` only). */
        disk_mib: positiveInt.default(8192),
      })
      .strict()
      .default({ cpu: 2, memory_mib: 8192, pids: 1024, disk_mib: 8192 }),
    /**
     * Refuse to start a sandbox-worker whose host cannot enforce every limit of `resources` (and the
     * seccomp filter). false: start anyway with a loud warning naming what is not enforced.
     */
    enforce_resources: z.boolean().default(true),
    /** The Docker engine's Unix socket for the `docker` provider; null: `DOCKER_HOST`, else /var/run/docker.sock. */
    docker_socket: nullableString,
    /** OpenSandbox server (`OPENSANDBOX_DOMAIN`), e.g. `http://opensandbox.internal:8080`. */
    domain: nullableString,
    /** OpenSandbox API key (`OPENSANDBOX_API_KEY`); a secret. */
    api_key: nullableString,
    /**
     * Reach each OpenSandbox sandbox through the server's proxy (the SDK's `useServerProxy`): for a
     * worker that cannot reach the sandboxes' host ports (the server's Docker in bridge mode elsewhere).
     */
    use_server_proxy: z.boolean().default(false),
    /** Host name the sandbox uses to reach the worker's gateway (opensandbox only). */
    gateway_host: nullableString,
    /** Port on which the policy gateway appears inside a `local` sandbox (`http://127.0.0.1:<port>/v1`). */
    gateway_port: z.number().int().min(1).max(65535).default(18080),
    /**
     * The host uid (and gid) a root worker's `local` sandboxes run as: never 0, so nothing sandboxed
     * is host root. Pick one no account of the host uses (a rootless worker's sandboxes run as its own uid).
     */
    host_uid: z.number().int().min(1).max(2 ** 31 - 2).default(100_000),
  })
  .strict();

/**
 * Fields of a chat call the gateway itself decides or the sandbox must not: `policy.sampling` cannot set them.
 * (`max_tokens` is `policy.max_output_tokens`; the token fields belong to `policy.token_capture`.)
 */
export const UNPINNABLE_SAMPLING_FIELDS = [
  'model', 'messages', 'tools', 'tool_choice', 'parallel_tool_calls', 'stream', 'stream_options', 'n', 'max_tokens', 'max_completion_tokens',
  'logprobs', 'top_logprobs', 'return_tokens_as_token_ids', 'return_token_ids', 'prompt_logprobs', 'echo', 'response_format',
] as const;

/** A JSON value of a sampling setting: a number, string, boolean, or a short list of them. */
const SamplingValue = z.union([z.number(), z.string().max(1000), z.boolean(), z.array(z.union([z.number(), z.string().max(1000)])).max(64)]);

export const SamplingSchema = z
  .record(z.string().regex(/^[a-z][a-z0-9_]*$/, 'a sampling field is a lowercase name such as temperature or top_p'), SamplingValue)
  .superRefine((fields, ctx) => {
    for (const key of Object.keys(fields)) {
      if ((UNPINNABLE_SAMPLING_FIELDS as readonly string[]).includes(key)) ctx.addIssue({ code: 'custom', path: [key], message: `${key} is not a sampling setting the run can pin (the gateway decides it)` });
    }
    if (Object.keys(fields).length > 32) ctx.addIssue({ code: 'custom', message: 'at most 32 sampling fields' });
  });

export const PolicySchema = z
  .object({
    /** Context window declared to OpenCode, in tokens. */
    context_window: positiveInt.default(128000),
    /** Output cap per model call, in tokens. */
    max_output_tokens: positiveInt.default(32768),
    /** Whole-request timeout for one model call, in seconds. */
    request_timeout_s: positiveInt.default(600),
    /** Store every policy call's request and response (token ids, logprobs) on the worker's host, for RL training. */
    capture: z.boolean().default(false),
    /**
     * Ask the policy server for token ids and log-probabilities on every call (vLLM's fields) and
     * deliver each rollout's trajectory beside the output JSONL (`<stem>_trajectories/`), for RL training.
     */
    token_capture: z.boolean().default(false),
    /**
     * Sampling settings pinned on every policy call (`temperature`, `top_p`, any other field the policy
     * server takes); they override what OpenCode sends, and token capture records them per call.
     */
    sampling: SamplingSchema.default({}),
    /** The policy's weight version, set by the trainer; recorded on every captured call. Null: none. */
    weight_version: z.string().max(256).nullable().default(null),
    /**
     * Other policy endpoints this worker may send its key to, when a run names one
     * (`vcfleet produce ++policy.endpoint=URL`). The worker's own `policy_base_url` is always allowed.
     */
    allowed_base_urls: z.array(z.string().url()).default([]),
    /**
     * The endpoint a run asks for (stored in the run record); null: every worker uses its own
     * `policy_base_url`. A worker that does not allow it fails the rollout, naming both.
     */
    endpoint: z.string().url().nullable().default(null),
    /** Largest request the gateway forwards, in MiB (the whole history, images included, is re-sent each call). */
    max_request_mib: positiveInt.default(256),
    /** Policy calls in flight at once per rollout; more are answered 429. */
    max_concurrent_calls: positiveInt.default(4),
    /** Policy calls per rollout; past it the session stops (stop reason timeout, with the reason in `error`). */
    max_calls_per_rollout: positiveInt.default(1000),
    /**
     * Bound of the time one rollout's calls may be held while the policy server pushes back (429, 503
     * with Retry-After), in seconds; the task timeout never counts that time. Past it the rollout goes
     * back to the queue without spending an attempt, once; the second time it spends one.
     */
    max_wait_s: positiveInt.default(600),
    /** A fleet-wide pace of policy calls per endpoint, shared by every sandbox-worker through Redis; null: none. */
    rate_limit: z
      .object({
        /** Policy calls per minute to the endpoint, over the whole fleet. */
        requests_per_min: z.number().positive().nullable().default(null),
        /** Tokens (prompt + completion) per minute to the endpoint, over the whole fleet. */
        tokens_per_min: z.number().positive().nullable().default(null),
      })
      .strict()
      .default({ requests_per_min: null, tokens_per_min: null }),
    /**
     * Adaptive concurrency: a sandbox-worker runs fewer sessions at once when the policy server
     * answers 429 or slows down, and more again when calls come back clean (additive increase,
     * multiplicative decrease, within `queues.rollout_concurrency`). Running sessions are never cut.
     */
    adaptive_concurrency: z.boolean().default(true),
  })
  .strict();

export const TranscriptsSchema = z
  .object({
    /** Keep a transcript record per rollout beside the output JSONL (`<stem>_transcripts/`). */
    enabled: z.boolean().default(true),
    /** Bytes of images (crops, plots the model was shown) kept per transcript, in MiB; more are kept by hash only. */
    max_image_mib: positiveInt.default(32),
  })
  .strict();

export const JudgeSchema = z
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

export const AgentSchema = z
  .object({
    /** `opencode`: the real agent in a sandbox. `scripted`: answers from `script_path` (tests, benchmarks). */
    kind: z.enum(['opencode', 'scripted']).default('opencode'),
    /** Path to the OpenCode binary; default: the one installed from npm with this project. */
    opencode_bin: nullableString,
    /** Stop the session after this many tool calls (OpenCode has no limit of its own). */
    max_tool_calls: positiveInt.default(200),
    /** For `kind: scripted`: a JSON file mapping task ids (or `*`) to scripted outcomes. */
    script_path: nullableString,
    /**
     * The heap budget of OpenCode's JavaScript runtime (Bun/JSC `BUN_JSC_forceRAMSize`), in MiB; null:
     * the runtime's own. Smaller saves memory per session at a cost in time (bench/RESULTS.md has the curve).
     */
    runtime_heap_mib: positiveInt.nullable().default(null),
  })
  .strict();

export const QueuesSchema = z
  .object({
    /** Redis key prefix of every queue and record of the fleet. */
    prefix: z
      .string()
      // `{tag}rest`: a Redis Cluster hash tag, so that every key of the fleet lives in one slot.
      .regex(/^(?:\{[A-Za-z0-9_.-]+\}[A-Za-z0-9_.-]*|[A-Za-z0-9_.-]+)$/, 'use letters, digits, "_", "-" or ".", optionally after a hash tag such as {vcfleet}')
      .default('vcfleet'),
    /**
     * Rollouts a sandbox-worker process runs at once: a number, or `auto` (as many sandboxes as this
     * host's memory holds at their `sandbox_config.resources.memory_mib`, less `memory_reserve_mib`).
     */
    rollout_concurrency: z.union([positiveInt, z.literal('auto')], { message: 'a whole number of at least 1, or auto' }).default(2),
    /** Memory a sandbox-worker leaves to everything else on its host (MiB): admission never counts it. */
    memory_reserve_mib: z.number().int().min(0).default(1024),
    /** Hold off new rollouts while the kernel reports more memory stall than this (PSI some avg10, %). */
    memory_pressure_max_pct: z.number().min(0).max(100).default(20),
    /** Results jobs the results consumer holds at once (its writes still run one at a time). */
    results_concurrency: positiveInt.default(4),
    /** Rollouts running at once across the whole fleet (BullMQ global concurrency). */
    rollout_global_concurrency: positiveInt.default(32),
    /** Attempts of a rollout on infrastructure errors before it is masked as infra_failed. */
    rollout_attempts: positiveInt.default(3),
    /** Base of the exponential backoff between rollout attempts, in milliseconds. */
    rollout_backoff_ms: positiveInt.default(5000),
    /** Attempts of a judge job (each attempt already retries the call `judge.max_retries` times). */
    judge_attempts: positiveInt.default(2),
    /** Base of the exponential backoff between judge job attempts, in milliseconds. */
    judge_backoff_ms: positiveInt.default(2000),
    /**
     * `vcfleet run` pauses its run when this many of its rollout attempts failed on the policy server
     * before any policy call was answered (0: never); resume it with `vcfleet run --run-id`.
     */
    fail_fast_after: z.number().int().min(0).default(3),
    /** How long a job lock lives without renewal before a stalled job is taken by another worker (ms). */
    lock_duration_ms: positiveInt.default(30000),
  })
  .strict();

export const PreflightSchema = z
  .object({
    /** Check endpoints, keys, sandboxes and Redis before a run enqueues anything (`--skip-preflight` turns it off). */
    enabled: z.boolean().default(true),
    /** Refuse a Redis that persists nothing (a restart would lose the run). */
    require_redis_persistence: z.boolean().default(true),
  })
  .strict();

/** `host:port` (a name, an IPv4 address or a bracketed IPv6 address, and a port). */
const hostPort = z.string().regex(/^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$/, 'host:port, e.g. 10.0.0.5:26379');

export const RedisSchema = z
  .object({
    /** Give up on a Redis that does not answer (refused, DENIED, NOAUTH, silent) after this long, naming the URL and its error. */
    connect_timeout_s: positiveInt.default(15),
    /** Redis Sentinel: `host:port` of each sentinel; with `sentinel_name`, the fleet asks them for the primary (and follows failovers). */
    sentinels: z.array(hostPort).default([]),
    /** The master group name the sentinels monitor (`sentinel monitor <name> …`). */
    sentinel_name: nullableString,
    /** The sentinels' own password (`requirepass` of the sentinels; `REDIS_SENTINEL_PASSWORD`); a secret. */
    sentinel_password: nullableString,
    /** Redis Cluster: connect as a cluster client; `queues.prefix` must start with a hash tag such as `{vcfleet}`. */
    cluster: z.boolean().default(false),
    /** Seed nodes of the cluster (`host:port`); the host of `redis_url`, when set, is one too. */
    cluster_nodes: z.array(hostPort).default([]),
  })
  .strict();

export const MetricsServerSchema = z
  .object({
    /** Port of the Prometheus `/metrics` endpoint of long-running roles; 0 turns it off. */
    port: z.number().int().min(0).max(65535).default(0),
    host: z.string().default('127.0.0.1'),
  })
  .strict();

export const DashboardSchema = z
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

export const ServeSchema = z
  .object({
    /** Address `vcfleet serve` binds; anything but 127.0.0.1, ::1 or localhost requires the dashboard's credentials. */
    host: z.string().default('127.0.0.1'),
    /** Port of `vcfleet serve` (0: any free port, printed at start). */
    port: z.number().int().min(0).max(65535).default(8088),
    /** Largest `POST /run` body, in MiB (images as data URLs included); past it the answer is 413. */
    max_request_mib: positiveInt.default(64),
    /** Largest image of a request, in MiB (decoded bytes); past it the answer is 413. */
    max_image_mib: positiveInt.default(20),
    /** Most `input_image` parts of one request. */
    max_images: positiveInt.max(32).default(8),
    /** How long a finished response waits in Redis for its client, in seconds (then only the run's row is left). */
    response_ttl_s: positiveInt.default(86_400),
    /** How long a response stays in Redis once fetched, in seconds (a client whose connection dropped fetches it again). */
    fetched_ttl_s: positiveInt.default(600),
  })
  .strict();

