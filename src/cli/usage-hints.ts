/**
 * Help for the ways users get the command line wrong: a setting typed as an option (`--limit=2`) or
 * as a bare word (`limit=2`) is refused with the form that works (`++limit=2`); an option the
 * command does not have (`run --limt 2`) with the nearest of its options or of the settings; and the
 * text that `--help` of the commands that run a benchmark ends with (settings and environment variables).
 */
import { configKeyPaths, nearestKey } from '../shared/config/key-paths.ts';
import { ConfigError } from '../shared/errors.ts';
import { cliName } from '../shared/text/advice.ts';

/** `--key=value`, `-key=value` or `key=value` whose key is a config key. */
const SETTING_LIKE = /^-{0,2}([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=(.*)$/s;

/** Throw a ConfigError for the first argument that is a setting written the wrong way; `options`: the long options commands define (`--benchmark=x` is one). */
export function refuseMistypedSettings(args: readonly string[], options: ReadonlySet<string> = new Set()): void {
  const keys = new Set(configKeyPaths());
  for (const arg of args) {
    const m = SETTING_LIKE.exec(arg);
    if (!m || !keys.has(m[1]) || options.has(`--${m[1]}`)) continue;
    const kind = arg.startsWith('-') ? `unknown option '${arg}'` : `unexpected argument '${arg}'`;
    throw new ConfigError(`${kind}: settings are given as ++key=value; did you mean \`++${m[1]}=${m[2]}\`?`);
  }
}

/**
 * Throw a ConfigError for the first `--name` (not `--name=value`: see refuseMistypedSettings) that is
 * not one of `options`, the long options of the command at hand (`command`, its name): "did you
 * mean" the nearest option (`runs --limt 5`: `--limit`) or else setting (`run --limt 2`:
 * `++limit=2`), or the list of its options when nothing is near.
 */
export function refuseUnknownOptions(command: string, args: readonly string[], options: ReadonlySet<string>): void {
  for (const [i, arg] of args.entries()) {
    if (arg === '--') return;
    if (!/^--[A-Za-z]/.test(arg) || arg.includes('=') || options.has(arg) || arg === '--help' || arg === '--version') continue;
    const name = arg.slice(2);
    const next = args[i + 1];
    const value = next !== undefined && !next.startsWith('-') && !next.startsWith('++') ? next : 'VALUE';
    const keys = configKeyPaths();
    const option = nearestKey(name, [...options].map((o) => o.slice(2)));
    const key = keys.includes(name) ? name : option ? null : nearestKey(name, keys);
    const unknown = `unknown option '${arg}' of \`vcfleet ${command}\``;
    if (option) throw new ConfigError(`${unknown}: did you mean \`--${option}\`?`);
    if (key) throw new ConfigError(`${unknown}: settings are given as ++key=value; did you mean \`++${key}=${value}\`?`);
    const listed = [...options].filter((o) => o !== '--help');
    throw new ConfigError(`${unknown}${listed.length ? `; its options: ${listed.join(', ')}` : ''} (\`${cliName()} ${command} --help\`; settings are given as ++key=value)`);
  }
}

/** How settings and the environment reach a run, for `--help` of `run`, `demo` and `serve`. */
export const SETTINGS_HELP = [
  '',
  'Settings: any config key as ++key=value (dotted keys for nested ones), e.g. ++limit=20',
  '  ++policy.token_capture=true ++visual_coding_opencode_judge_model_name=gpt-4o-mini',
  '  (the keys and their defaults: configs/visual_coding_opencode.yaml; a file of your own: --config or VCFLEET_CONFIG)',
  'Environment:',
  '  POLICY_BASE_URL     the policy endpoint (OpenAI-compatible, image input), e.g. http://my-vlm:8000/v1',
  '  POLICY_MODEL        the policy model name',
  '  POLICY_API_KEY      the policy endpoint key',
  '  OPENAI_API_KEY      the judge key (gpt-4o-mini on the OpenAI API by default)',
  '  BABYVISION_PARQUET  an offline copy of BabyVision (else the pinned revision is downloaded)',
  '  REDIS_URL           the fleet Redis (else a private redis-server under .vcfleet/redis)',
].join('\n');
