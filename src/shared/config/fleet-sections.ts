/**
 * The sections of the configuration that run the fleet itself (schema.ts puts them together
 * with rollout-sections.ts): queues, preflight, Redis, the metrics endpoint, the dashboard and serve.
 * Each key documents itself; configs/visual_coding_opencode.yaml shows them all.
 */
import { z } from 'zod';
import { nullableString, positiveInt } from './fields.ts';

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
    /** `vcfleet run`/`demo`: end the run (exit 4, with the command to resume) once its Redis did not answer for this long; a worker waits for ever. */
    outage_limit_s: positiveInt.default(300),
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
    /**
     * Refuse (400) a `POST /run` without `policy.weight_version`: a trainer's rows then always say which
     * weights they are for, and a repeated `_ng_rollout_id` of another step is refused (409), never
     * answered with an older step's response.
     */
    require_weight_version: z.boolean().default(false),
    /** Most requests of the run accepted and not finished (all serve processes of the run together); past it 429 with Retry-After. */
    max_pending: positiveInt.default(256),
    /** Budget of the images of the pending requests of the run, in MiB (decoded bytes, kept in Redis until the response); past it 429. */
    max_pending_image_mib: positiveInt.default(2048),
    /** Largest `POST /aggregate_metrics` body (the rows of a collection, responses included), in MiB, at most 512 (the body is read as one string); past it 413. */
    max_metrics_request_mib: positiveInt.max(512).default(512),
    /**
     * Addresses and CIDR blocks (`10.0.0.5`, `10.0.0.0/8`, `fd00::/8`) whose requests need no
     * credentials: the TCP peer address decides, never a forwarded header. Others still need the
     * dashboard's credentials; with a list, serve may bind beyond loopback without any (then only
     * the listed get in). Default none.
     */
    allow_from: z.array(z.string().min(1).max(64)).max(256).default([]),
    /**
     * Seconds a connection has to send a request's complete headers, from when it opened (or its last
     * response ended): a silent socket, or one that trickles header lines, is closed past it.
     */
    headers_timeout_s: positiveInt.default(20),
    /** Seconds a client has to send its whole request (headers and body); waiting for the response is not counted. */
    request_timeout_s: positiveInt.default(120),
    /** Seconds an idle keep-alive connection stays open after its response. */
    keep_alive_timeout_s: positiveInt.default(5),
    /** Most connections open at once; past it new ones are closed at once (a flood cannot hold the process). */
    max_connections: positiveInt.default(1024),
  })
  .strict();

