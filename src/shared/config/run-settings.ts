/**
 * A run's settings: the part of the configuration that belongs to the run rather than to a host,
 * frozen by `produce` into the run record (versioned) and read by every worker that serves the run.
 * Which keys they are is marked on the config schema itself (`runSetting`, fields.ts), and the
 * record keeps each under its config key: `judge.max_tokens` is `settings.judge.max_tokens` everywhere.
 * What a worker sends its key to, where files go, Redis, sandboxes and concurrency are host settings:
 * each host reads them from its own configuration. No secret and no credential is ever in here.
 */
import { z } from 'zod';
import { RUN_SETTING_MARKS, type RunSettingMeta, type RunSettingsOf } from './fields.ts';
import { ConfigSchema, type Config } from './schema.ts';
import { PoisonJobError } from '../errors.ts';

/**
 * 2: every setting under its config key. 1 (vcfleet 0.1.0 on): the same, but for the two model
 * names, kept as `policy.model_name` and `judge.model_name`; still read (fromVersion1).
 */
export const RUN_SETTINGS_VERSION = 2;
const READABLE_VERSIONS = [1, RUN_SETTINGS_VERSION];

interface MarkedField {
  /** The config key, as a user types it after `++`. */
  key: string;
  path: readonly string[];
  field: z.ZodType;
  meta: RunSettingMeta;
}

/** A section's object schema under its default, or null for a field that is no section. */
function section(schema: z.ZodType): z.ZodObject | null {
  let s = schema;
  while (s instanceof z.ZodDefault || s instanceof z.ZodPrefault) s = s.unwrap() as z.ZodType;
  return s instanceof z.ZodObject ? s : null;
}

/** The marked fields of an object schema, in schema order: sections are searched; a marked field is one setting (a map too). */
function markedFields(schema: z.ZodType, at: readonly string[] = []): MarkedField[] {
  return Object.entries(section(schema)?.shape ?? {}).flatMap(([name, field]: [string, z.ZodType]) => {
    const path = [...at, name];
    const meta = RUN_SETTING_MARKS.get(field);
    return meta ? [{ key: path.join('.'), path, field, meta }] : markedFields(field, path);
  });
}

const MARKED = markedFields(ConfigSchema);

/** The object schema of `fields` at `depth` of their paths, sections nested (and filled with defaults when absent). */
function objectOf(fields: readonly MarkedField[], depth = 0): Record<string, z.ZodType> {
  const shape: Record<string, z.ZodType> = {};
  for (const name of new Set(fields.map((f) => f.path[depth]))) {
    const here = fields.filter((f) => f.path[depth] === name);
    const leaf = here.find((f) => f.path.length === depth + 1);
    shape[name] = leaf ? leaf.field : z.object(objectOf(here, depth + 1)).prefault({});
  }
  return shape;
}

/** The run settings: the config's marked keys, each under its own name, with its own type and default. */
export type RunSettings = { settings_version: typeof RUN_SETTINGS_VERSION } & RunSettingsOf<typeof ConfigSchema>;

// Built from the marks, so its type is declared by RunSettings (read off the same marks by the type checker).
/**
 * The policy section of a run's settings, as the gateway and the agent read it: the section as the
 * schema gives it (its defaults stated there once), never renamed on the way.
 */
export type PolicySettings = RunSettings['policy'];

/** The agent section of a run's settings, as the agent runner reads it. */
export type AgentSettings = RunSettings['agent'];

export const RunSettingsSchema = z.object({ settings_version: z.literal(RUN_SETTINGS_VERSION), ...objectOf(MARKED) }) as unknown as z.ZodType<RunSettings>;

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
 * settings (the same path). `fixed` ones make the run's rollouts (changing them means a new run).
 */
export const RUN_SETTING_KEYS: ReadonlyArray<{ key: string; path: readonly string[]; fixed?: true }> = MARKED.map(({ key, path, meta }) => ({ key, path, ...(meta.fixed ? { fixed: true as const } : {}) }));

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

/** A config value as a run stores it (a URL without credentials). */
function stored(setting: MarkedField, config: Config): unknown {
  const value = valueAt(config, setting.path);
  return setting.meta.withoutCredentials && typeof value === 'string' ? stripCredentials(value) : value;
}

export function runSettingsFrom(config: Config): RunSettings {
  const out: Record<string, unknown> = { settings_version: RUN_SETTINGS_VERSION };
  for (const setting of MARKED) setAt(out, setting.path, stored(setting, config));
  return RunSettingsSchema.parse(out);
}

/** `settings` with the run setting `key` set to the value `config` has for it (a copy). */
export function withSetting(settings: RunSettings, key: string, config: Config): RunSettings {
  const setting = MARKED.find((m) => m.key === key);
  if (!setting) throw new Error(`${key} is not a run setting`);
  const copy = structuredClone(settings) as unknown as Record<string, unknown>;
  setAt(copy, setting.path, stored(setting, config));
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

/** A version-1 record as version 2: the two model names move out of `policy` and `judge` to their config keys. */
function fromVersion1(raw: Record<string, unknown>): Record<string, unknown> {
  const { model_name: policyModel, ...policy } = (raw.policy ?? {}) as Record<string, unknown>;
  const { model_name: judgeModel, ...judge } = (raw.judge ?? {}) as Record<string, unknown>;
  return { ...raw, settings_version: 2, policy_model_name: policyModel, policy, visual_coding_opencode_judge_model_name: judgeModel, judge };
}

/**
 * The settings of a run record. A setting added since the record was written takes its default (run
 * settings can grow without a new version); a record of a version this worker does not read stops
 * the job with a message that says so.
 */
export function parseRunSettings(runId: string, raw: unknown): RunSettings {
  const version = (raw as { settings_version?: unknown } | null | undefined)?.settings_version;
  if (!READABLE_VERSIONS.includes(version as number)) {
    const what = version === undefined ? 'an older vcfleet (its run record has no settings version)' : `a vcfleet whose run settings are version ${String(version)}`;
    throw new PoisonJobError(`run ${runId} was produced by ${what}; this worker reads versions ${READABLE_VERSIONS.join(' and ')}: serve it with the vcfleet that produced it, or produce the run again`);
  }
  const parsed = RunSettingsSchema.safeParse(version === 1 ? fromVersion1(raw as Record<string, unknown>) : raw);
  if (!parsed.success) {
    throw new PoisonJobError(`run ${runId} has malformed settings: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return parsed.data;
}
