/**
 * A run's settings: the part of the configuration that belongs to the run rather than to a host,
 * frozen by `produce` into the run record (versioned) and read by every worker that serves the run.
 * What a worker sends its key to, where files go, Redis, sandboxes and concurrency are host settings:
 * each host reads them from its own configuration. No secret and no credential is ever in here.
 */
import { z } from 'zod';
import { ConfigSchema, type Config } from './config-schema.ts';
import { SamplingSchema } from './config-sections.ts';
import { PoisonJobError } from './errors.ts';

export const RUN_SETTINGS_VERSION = 1;

export const RunSettingsSchema = z.object({
  settings_version: z.literal(RUN_SETTINGS_VERSION),
  benchmark: z.string(),
  num_repeats: z.number().int().positive(),
  limit: z.number().int().positive().nullable(),
  /** Wall-clock budget of one rollout, in seconds. */
  task_timeout_s: z.number().int().positive(),
  policy: z.object({
    model_name: z.string(),
    context_window: z.number().int().positive(),
    max_output_tokens: z.number().int().positive(),
    request_timeout_s: z.number().int().positive(),
    capture: z.boolean(),
    /** The endpoint the run asks for (credentials removed); null: each worker's own `policy_base_url`. */
    endpoint: z.string().nullable(),
    max_request_mib: z.number().int().positive(),
    max_concurrent_calls: z.number().int().positive(),
    max_calls_per_rollout: z.number().int().positive(),
    /** Token ids and log-probabilities of every call, and a trajectory per rollout (older runs: off). */
    token_capture: z.boolean().default(false),
    /** Sampling fields pinned on every call (older runs: none). */
    sampling: SamplingSchema.default({}),
    /** The trainer's weight version, recorded on every captured call (older runs: none). */
    weight_version: z.string().nullable().default(null),
  }),
  judge: z.object({ model_name: z.string(), temperature: z.number(), max_tokens: z.number().int().positive() }),
  agent: z.object({ max_tool_calls: z.number().int().positive() }),
  transcripts: z.object({ enabled: z.boolean(), max_image_mib: z.number().int().positive() }),
});
export type RunSettings = z.infer<typeof RunSettingsSchema>;

/** A URL without user name and password (safe to store, log and serve). */
export function stripCredentials(url: string): string {
  try {
    const u = new URL(url);
    if (!u.username && !u.password) return url;
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return url.replace(/\/\/[^/@]*@/, '//');
  }
}

/**
 * Every run setting, by the config key a user types (`++key=value`) and where it lives in the run's
 * settings. `fixed` ones make the run's rollouts (changing them means a new run).
 */
export const RUN_SETTING_KEYS: ReadonlyArray<{ key: string; path: readonly string[]; fixed?: true }> = [
  { key: 'benchmark', path: ['benchmark'], fixed: true },
  { key: 'num_repeats', path: ['num_repeats'], fixed: true },
  { key: 'limit', path: ['limit'], fixed: true },
  { key: 'task_timeout_s', path: ['task_timeout_s'] },
  { key: 'policy_model_name', path: ['policy', 'model_name'] },
  { key: 'policy.context_window', path: ['policy', 'context_window'] },
  { key: 'policy.max_output_tokens', path: ['policy', 'max_output_tokens'] },
  { key: 'policy.request_timeout_s', path: ['policy', 'request_timeout_s'] },
  { key: 'policy.capture', path: ['policy', 'capture'] },
  { key: 'policy.endpoint', path: ['policy', 'endpoint'] },
  { key: 'policy.max_request_mib', path: ['policy', 'max_request_mib'] },
  { key: 'policy.max_concurrent_calls', path: ['policy', 'max_concurrent_calls'] },
  { key: 'policy.max_calls_per_rollout', path: ['policy', 'max_calls_per_rollout'] },
  { key: 'policy.token_capture', path: ['policy', 'token_capture'] },
  { key: 'policy.sampling', path: ['policy', 'sampling'] },
  { key: 'policy.weight_version', path: ['policy', 'weight_version'] },
  { key: 'visual_coding_opencode_judge_model_name', path: ['judge', 'model_name'] },
  { key: 'judge.temperature', path: ['judge', 'temperature'] },
  { key: 'judge.max_tokens', path: ['judge', 'max_tokens'] },
  { key: 'agent.max_tool_calls', path: ['agent', 'max_tool_calls'] },
  { key: 'transcripts.enabled', path: ['transcripts', 'enabled'] },
  { key: 'transcripts.max_image_mib', path: ['transcripts', 'max_image_mib'] },
];

/** The value at a dotted path of a plain object (undefined when absent). */
export function valueAt(obj: unknown, path: readonly string[]): unknown {
  let at = obj;
  for (const part of path) at = at !== null && typeof at === 'object' ? (at as Record<string, unknown>)[part] : undefined;
  return at;
}

function setAt(obj: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let at = obj;
  for (const part of path.slice(0, -1)) at = (at[part] ??= {}) as Record<string, unknown>;
  at[path[path.length - 1]] = value;
}

/** A config value as a run stores it: an endpoint without credentials. */
function stored(key: string, value: unknown): unknown {
  return key === 'policy.endpoint' && typeof value === 'string' ? stripCredentials(value) : value;
}

export function runSettingsFrom(config: Config): RunSettings {
  const out: Record<string, unknown> = { settings_version: RUN_SETTINGS_VERSION };
  for (const { key, path } of RUN_SETTING_KEYS) setAt(out, path, stored(key, valueAt(config, key.split('.'))));
  return RunSettingsSchema.parse(out);
}

/** `settings` with the run setting `key` set to the value `config` has for it (a copy). */
export function withSetting(settings: RunSettings, key: string, config: Config): RunSettings {
  const entry = RUN_SETTING_KEYS.find((k) => k.key === key);
  if (!entry) throw new Error(`${key} is not a run setting`);
  const copy = structuredClone(settings) as unknown as Record<string, unknown>;
  setAt(copy, entry.path, stored(key, valueAt(config, key.split('.'))));
  return RunSettingsSchema.parse(copy);
}

export interface SettingDifference {
  key: string;
  /** The run's value. */
  run: unknown;
  /** The other value (this host's configuration, or a change asked for). */
  other: unknown;
}

/** The run settings whose values differ between `run` and `other`, by config key. */
export function settingDifferences(run: RunSettings, other: RunSettings): SettingDifference[] {
  return RUN_SETTING_KEYS.flatMap(({ key, path }) => {
    const [a, b] = [valueAt(run, path), valueAt(other, path)];
    return JSON.stringify(a) === JSON.stringify(b) ? [] : [{ key, run: a, other: b }];
  });
}

/** A setting's value as a user types it after `++key=`. */
export function shownValue(value: unknown): string {
  return value === null || value === undefined ? 'null' : typeof value === 'string' ? value : JSON.stringify(value);
}

/** Run settings as the defaults of the configuration make them (what a setting a record lacks is taken from). */
let defaults: RunSettings | undefined;
function defaultRunSettings(): RunSettings {
  defaults ??= runSettingsFrom(ConfigSchema.parse({}));
  return defaults;
}

/** `base` with `over`'s values laid over it, object by object (arrays and scalars replace). */
function overlay(base: unknown, over: unknown): unknown {
  if (!over || typeof over !== 'object' || Array.isArray(over) || !base || typeof base !== 'object' || Array.isArray(base)) return over === undefined ? base : over;
  const out: Record<string, unknown> = { ...(base as Record<string, unknown>) };
  for (const [k, v] of Object.entries(over as Record<string, unknown>)) out[k] = overlay(out[k], v);
  return out;
}

/**
 * The settings of a run record. A setting added since the record was written takes its default (run
 * settings can grow without a new version); a record of another version stops the job with a message
 * that says so.
 */
export function parseRunSettings(runId: string, raw: unknown): RunSettings {
  const version = (raw as { settings_version?: unknown } | null | undefined)?.settings_version;
  if (version !== RUN_SETTINGS_VERSION) {
    const what = version === undefined ? 'an older vcfleet (its run record has no settings version)' : `a vcfleet whose run settings are version ${String(version)}`;
    throw new PoisonJobError(`run ${runId} was produced by ${what}; this worker reads version ${RUN_SETTINGS_VERSION}: serve it with the vcfleet that produced it, or produce the run again`);
  }
  const parsed = RunSettingsSchema.safeParse(overlay(defaultRunSettings(), raw));
  if (!parsed.success) {
    throw new PoisonJobError(`run ${runId} has malformed settings: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return parsed.data;
}
