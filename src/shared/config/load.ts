/**
 * The run configuration: one YAML file, `${env:VAR,default}` interpolation, `++key=value` overrides,
 * one zod schema with every default filled. This is the only module that reads `process.env`.
 */
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import type { z } from 'zod';
import { ConfigError } from '../errors.ts';
import { ConfigSchema, SECRET_PATHS, type Config } from './schema.ts';
import { nearestKey } from './key-paths.ts';

export { BENCHMARKS, ConfigSchema, SECRET_PATHS, type BenchmarkName, type Config } from './schema.ts';

export const DEFAULT_CONFIG_PATH = fileURLToPath(
  new URL('../../../configs/visual_coding_opencode.yaml', import.meta.url),
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
  // `{vcfleet}` is a Redis Cluster hash tag (queues.prefix), not a YAML mapping of one key to null.
  if (/^\{[A-Za-z0-9_.-]+\}[A-Za-z0-9_.-]*$/.test(raw)) return raw;
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
  ['REDIS_SENTINEL_PASSWORD', 'redis.sentinel_password'],
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
  const rawText = new Map<string, string>();
  for (const arg of options.overrides ?? []) {
    const body = arg.replace(/^\+\+/, '');
    const eq = body.indexOf('=');
    if (eq <= 0) throw new ConfigError(`override "${arg}" must look like ++key=value (dotted keys for nested settings)`);
    const key = body.slice(0, eq);
    if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/.test(key)) {
      throw new ConfigError(`override "${arg}": "${key}" is not a config key`);
    }
    setPath(doc, key, parseScalar(body.slice(eq + 1)));
    rawText.set(key, body.slice(eq + 1));
    prov.set(key, `command line ${key.includes('api_key') || (SECRET_PATHS as readonly string[]).includes(key) ? `++${key}=***` : arg}`);
  }
  const parsed = parseWithTextSettings(doc, rawText);
  if (!parsed.success) throw new ConfigError(describeIssues(parsed.error, prov, file));
  return parsed.data;
}

/**
 * Parse; a setting that takes text but was given a number or a boolean (`++policy.weight_version=120`,
 * `policy_model_name: 123` in YAML) takes it as its text (as typed on the command line), then parse again.
 */
function parseWithTextSettings(doc: Record<string, unknown>, rawText: ReadonlyMap<string, string>): ReturnType<typeof ConfigSchema.safeParse> {
  let parsed = ConfigSchema.safeParse(doc);
  for (let round = 0; round < 3 && !parsed.success; round++) {
    const textual = parsed.error.issues.filter((i) => i.code === 'invalid_type' && i.expected === 'string' && i.path.length > 0);
    let changed = false;
    for (const issue of textual) {
      const key = issue.path.join('.');
      const value = getPath(doc, key);
      if (typeof value !== 'number' && typeof value !== 'boolean') continue;
      setPath(doc, key, rawText.get(key) ?? String(value));
      changed = true;
    }
    if (!changed) break;
    parsed = ConfigSchema.safeParse(doc);
  }
  return parsed;
}

function describeIssues(error: z.ZodError, prov: Provenance, file: string): string {
  const lines = error.issues.map((issue) => {
    const keys = issue.code === 'unrecognized_keys' ? issue.keys.map((k) => [...issue.path, k].join('.')) : [];
    const key = issue.path.join('.');
    if (keys.length > 0) {
      return keys.map((k) => `unknown config key "${k}" (from ${findSource(prov, k) ?? file}); ${spellingHint(k)}`).join('\n');
    }
    const source = findSource(prov, key) ?? 'the built-in default';
    return `config key "${key}": ${issue.message} (value from ${source})`;
  });
  return `invalid configuration:\n  ${lines.join('\n  ')}`;
}

/** The nearest known key when the unknown one looks like its typo, else where the keys are listed. */
function spellingHint(key: string): string {
  const near = nearestKey(key);
  return near ? `did you mean "${near}"?` : `check its spelling against ${DEFAULT_CONFIG_PATH}`;
}

/** Where a key's value came from: its own entry or its nearest parent's, else a key set under it (`++judgee.cache=1` for `judgee`). */
function findSource(prov: Provenance, key: string): string | undefined {
  for (let parts = key.split('.'); parts.length > 0; parts = parts.slice(0, -1)) {
    const hit = prov.get(parts.join('.'));
    if (hit) return hit;
  }
  for (const [at, source] of prov) if (at.startsWith(`${key}.`)) return source;
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
