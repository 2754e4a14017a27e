/**
 * The sections of the configuration a rollout is made of (schema.ts puts them together with
 * fleet-sections.ts): sandboxes, the policy and its gateway, transcripts, the judge and the agent.
 * Each key documents itself; configs/visual_coding_opencode.yaml shows them all.
 */
import { z } from 'zod';
import { nullableString, positiveInt, runSetting } from './fields.ts';

export const SandboxConfigSchema = z
  .object({
    /** Sandbox image of the `opensandbox` and `docker` providers (`VISUAL_CODING_OPENCODE_SANDBOX_IMAGE`). */
    image: z.string().default('visual-coding-fleet-sandbox:latest'),
    /**
     * The OpenCode binary inside that image, by absolute path (`VCFLEET_SANDBOX_OPENCODE_BIN`): run as
     * such, since a server may not keep the image's `PATH` (sandbox_image/Dockerfile installs it here).
     */
    opencode_bin: z.string().regex(/^\//, 'an absolute path inside the sandbox image, e.g. /opt/opencode/bin/opencode').default('/opt/opencode/bin/opencode'),
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
    context_window: runSetting(positiveInt.default(128000)),
    /** Output cap per model call, in tokens. */
    max_output_tokens: runSetting(positiveInt.default(32768)),
    /** Whole-request timeout for one model call, in seconds. */
    request_timeout_s: runSetting(positiveInt.default(600)),
    /** Store every policy call's request and response (token ids, logprobs) on the worker's host, for RL training. */
    capture: runSetting(z.boolean().default(false)),
    /**
     * Other policy endpoints this worker may send its key to, when a run names one
     * (`vcfleet produce ++policy.endpoint=URL`). The worker's own `policy_base_url` is always allowed.
     */
    allowed_base_urls: z.array(z.string().url()).default([]),
    /**
     * The endpoint a run asks for (stored in the run record); null: every worker uses its own
     * `policy_base_url`. A worker that does not allow it fails the rollout, naming both.
     */
    endpoint: runSetting(z.string().url().nullable().default(null), { withoutCredentials: true }),
    /** Largest request the gateway forwards, in MiB (the whole history, images included, is re-sent each call). */
    max_request_mib: runSetting(positiveInt.default(256)),
    /** Policy calls in flight at once per rollout; more are answered 429. */
    max_concurrent_calls: runSetting(positiveInt.default(4)),
    /** Policy calls per rollout; past it the session stops (stop reason timeout, with the reason in `error`). */
    max_calls_per_rollout: runSetting(positiveInt.default(1000)),
    /**
     * Ask the policy server for token ids and log-probabilities on every call (vLLM's fields) and
     * deliver each rollout's trajectory beside the output JSONL (`<stem>_trajectories/`), for RL training.
     */
    token_capture: runSetting(z.boolean().default(false)),
    /**
     * With token capture: send each earlier assistant turn upstream as the model generated it (its
     * content without the parser's stray whitespace, its reasoning under `reasoning` and
     * `reasoning_content`), so a plain vLLM re-renders it as generated (docs/train.md).
     */
    token_capture_restore_turns: runSetting(z.boolean().default(true)),
    /**
     * With token capture: carry the earlier calls' token ids on the assistant messages the way NeMo Gym
     * does (`prompt_token_ids`, `generation_token_ids`, `generation_log_probs`), for a splicing server
     * (NeMo RL's vLLM server) to continue from the exact ids. Default off (plain vLLM ignores them).
     */
    token_capture_splice: runSetting(z.boolean().default(false)),
    /** With token capture: MiB of the images the answered calls carried, kept for the trajectory (apart from `transcripts.max_image_mib`); past it the rollout is masked `images_over_budget`. */
    token_capture_max_image_mib: runSetting(positiveInt.default(256)),
    /**
     * Sampling settings pinned on every policy call (`temperature`, `top_p`, any other field the policy
     * server takes); they override what OpenCode sends, and token capture records them per call.
     */
    sampling: runSetting(SamplingSchema.default({})),
    /** The policy's weight version, set by the trainer; recorded on every captured call. Null: none. */
    weight_version: runSetting(z.string().max(256).nullable().default(null)),
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
    enabled: runSetting(z.boolean().default(true)),
    /** Bytes of images (crops, plots the model was shown) kept per transcript, in MiB; more are kept by hash only. */
    max_image_mib: runSetting(positiveInt.default(32)),
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
    /**
     * Grade from the verdict cache what was graded before by the same judge (model, endpoint, prompt,
     * question, gold, answer), so repeats and rejudges never pay twice; each such verdict is counted
     * (`judge_cache_hits`). A run setting: the run's own choice, whichever host grades it.
     */
    cache: runSetting(z.boolean().default(true)),
    temperature: runSetting(z.number().min(0).default(0)),
    max_tokens: runSetting(positiveInt.default(1024)),
    /**
     * Ask for the verdict as structured output (`response_format` with a JSON schema of `verdict` and
     * `reason`). An endpoint that refuses the field (HTTP 400/422 naming it) is asked again without it,
     * and not asked with it again by this process; the reply is read the same way either way.
     */
    structured_output: z.boolean().default(true),
  })
  .strict();

export const AgentSchema = z
  .object({
    /** `opencode`: the real agent in a sandbox. `scripted`: answers from `script_path` (tests, benchmarks). */
    kind: z.enum(['opencode', 'scripted']).default('opencode'),
    /** Path to the OpenCode binary; default: the one installed from npm with this project. */
    opencode_bin: nullableString,
    /** Stop the session after this many tool calls (OpenCode has no limit of its own). */
    max_tool_calls: runSetting(positiveInt.default(200)),
    /** For `kind: scripted`: a JSON file mapping task ids (or `*`) to scripted outcomes. */
    script_path: nullableString,
    /**
     * The heap budget of OpenCode's JavaScript runtime (Bun/JSC `BUN_JSC_forceRAMSize`), in MiB; null:
     * the runtime's own. Smaller saves memory per session at a cost in time (bench/RESULTS.md has the curve).
     */
    runtime_heap_mib: positiveInt.nullable().default(null),
  })
  .strict();
