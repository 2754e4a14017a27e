/** The config: YAML, ${env:...} interpolation, ++overrides, flat reference keys, clear errors. */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigSchema, loadConfig, redactConfig, secretValues } from '../../../src/shared/config/load.ts';
import { configKeyPaths, editDistance, nearestKey } from '../../../src/shared/config/key-paths.ts';
import { ConfigError } from '../../../src/shared/errors.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';

afterEach(() => removeTmpDirs());

function errorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('fills every default from the shipped YAML with an empty environment', () => {
    const c = loadConfig({ env: {} });
    expect(c).toMatchObject({
      benchmark: 'babyvision_opencode', split: 'train', data_dir: 'data', task_timeout_s: 1800, num_repeats: 1, limit: null,
      policy_base_url: 'http://127.0.0.1:8000/v1', policy_model_name: 'policy', policy_api_key: null,
      visual_coding_opencode_judge_model_name: 'gpt-4o-mini', visual_coding_opencode_judge_base_url: 'https://api.openai.com/v1',
      sandbox_provider: 'local', sandbox_workdir: '/workspace', sandbox_network_access: 'model_only', redis_url: null,
      reuse_existing_data_preparation: true,
    });
    expect(c.sandbox_config).toMatchObject({ ttl_s: 7200, resources: { cpu: 2, memory_mib: 8192, pids: 1024, disk_mib: 8192 }, enforce_resources: true });
  });

  it('fills the sandbox limits a config leaves out, and refuses unknown ones', () => {
    const partial = loadConfig({ env: {}, overrides: ['++sandbox_config.resources={memory_mib: 512}', '++sandbox_config.enforce_resources=false'] });
    expect(partial.sandbox_config).toMatchObject({ resources: { cpu: 2, memory_mib: 512, pids: 1024, disk_mib: 8192 }, enforce_resources: false });
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++sandbox_config.resources.swap_mib=1'] }))).toMatch(/swap_mib/);
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++sandbox_config.resources.pids=0'] }))).toMatch(/"sandbox_config.resources.pids"/);
  });

  it('reads the reference environment variables', () => {
    const c = loadConfig({
      env: { POLICY_BASE_URL: 'http://vlm:9000/v1', POLICY_API_KEY: 'pk-123456', POLICY_MODEL: 'qwen-vl', OPENAI_API_KEY: 'sk-abcdef', BABYVISION_PARQUET: '/d/bv.parquet', VISUAL_CODING_OPENCODE_SANDBOX_IMAGE: 'img:1', OPENSANDBOX_DOMAIN: 'http://osb:8080', OPENSANDBOX_API_KEY: 'osb-key-1', REDIS_URL: 'redis://r:6379' },
    });
    expect(c).toMatchObject({ policy_base_url: 'http://vlm:9000/v1', policy_api_key: 'pk-123456', policy_model_name: 'qwen-vl', babyvision_parquet: '/d/bv.parquet', redis_url: 'redis://r:6379' });
    expect(c.judge.api_key).toBe('sk-abcdef');
    expect(c.sandbox_config).toMatchObject({ image: 'img:1', domain: 'http://osb:8080', api_key: 'osb-key-1' });
    expect(secretValues(c).sort()).toEqual(['osb-key-1', 'pk-123456', 'sk-abcdef']);
    const red = JSON.stringify(redactConfig(c));
    for (const s of secretValues(c)) expect(red).not.toContain(s);
  });

  it('applies ++overrides last, typed as YAML scalars, with dotted keys', () => {
    const c = loadConfig({
      env: { POLICY_MODEL: 'from-env' },
      overrides: ['++policy_model_name=from-cli', '++limit=5', '++judge.rate_limit_per_s=2.5', '++reuse_existing_data_preparation=false', '++output_jsonl_fpath=out/x.jsonl', '++split=train', '++visual_coding_opencode_judge_base_url=http://j:1/v1', '++visual_coding_opencode_judge_model_name=jm'],
    });
    expect(c).toMatchObject({ policy_model_name: 'from-cli', limit: 5, reuse_existing_data_preparation: false, output_jsonl_fpath: 'out/x.jsonl', visual_coding_opencode_judge_base_url: 'http://j:1/v1', visual_coding_opencode_judge_model_name: 'jm' });
    expect(c.judge.rate_limit_per_s).toBe(2.5);
  });

  it('takes the reference\'s split name and refuses values that would do nothing', () => {
    expect(loadConfig({ env: {}, overrides: ['++split=benchmark'] }).split).toBe('benchmark');
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++split=test'] }))).toMatch(/"split": BabyVision has one split/);
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++sandbox_network_access=full'] }))).toMatch(/"sandbox_network_access": model_only is the one network mode/);
  });

  it('names the key and where its value came from', () => {
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++task_timeout_s=soon'] }))).toMatch(/"task_timeout_s".*command line \+\+task_timeout_s=soon/);
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++polcy_model_name=x'] }))).toMatch(/unknown config key "polcy_model_name" \(from command line/);
    expect(errorOf(() => loadConfig({ env: { POLICY_BASE_URL: 'not a url' } }))).toMatch(/"policy_base_url".*environment variable POLICY_BASE_URL/);
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++num_repeats=0'] }))).toMatch(/"num_repeats"/);
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++limit'] }))).toMatch(/\+\+key=value/);
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++run_id=a:b'] }))).toMatch(/"run_id".*no ":"/);
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++policy_api_key=sk-SECRET999', '++limit=x'] }))).not.toContain('sk-SECRET999');
  });

  it('reports a missing or broken config file and unknown keys in it', () => {
    const dir = createTmpDir();
    expect(errorOf(() => loadConfig({ configPath: path.join(dir, 'nope.yaml'), env: {} }))).toMatch(/does not exist/);
    const bad = path.join(dir, 'bad.yaml');
    writeFileSync(bad, 'limit: [1\n');
    expect(errorOf(() => loadConfig({ configPath: bad, env: {} }))).toMatch(/not valid YAML/);
    const typo = path.join(dir, 'typo.yaml');
    writeFileSync(typo, 'judge:\n  rate_limit: 3\n');
    expect(errorOf(() => loadConfig({ configPath: typo, env: {} }))).toMatch(/unknown config key "judge.rate_limit" \(from .*typo.yaml\)/);
    const interp = path.join(dir, 'interp.yaml');
    writeFileSync(interp, 'num_repeats: ${env:REPEATS,2}\noutput_jsonl_fpath: out/${env:NAME,run}.jsonl\n');
    expect(loadConfig({ configPath: interp, env: {} })).toMatchObject({ num_repeats: 2, output_jsonl_fpath: 'out/run.jsonl' });
    expect(loadConfig({ configPath: interp, env: { REPEATS: '3', NAME: 'x' } })).toMatchObject({ num_repeats: 3, output_jsonl_fpath: 'out/x.jsonl' });
  });
});

describe('++overrides of long digit strings', () => {
  it('keeps a SHA-256 made only of digits as text', () => {
    const digits = '1'.repeat(64);
    expect(loadConfig({ env: {}, overrides: [`++babyvision.sha256=${digits}`] }).babyvision.sha256).toBe(digits);
    expect(loadConfig({ env: {}, overrides: ['++limit=12'] }).limit).toBe(12);
  });
});

describe('unknown config keys', () => {
  it('suggest the nearest known key, nested keys too, from the command line or a file', () => {
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++polcy_model_name=x'] }))).toMatch(
      /unknown config key "polcy_model_name" \(from command line \+\+polcy_model_name=x\); did you mean "policy_model_name"\?/,
    );
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++judge.rate_limit_per_sec=2'] }))).toContain('did you mean "judge.rate_limit_per_s"?');
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++sandbox_config.resources.memroy_mib=2'] }))).toContain('did you mean "sandbox_config.resources.memory_mib"?');
    // A whole unknown section is one unknown key; a dot written as "_" is one edit.
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++judgee.cache=false'] }))).toContain('unknown config key "judgee" (from command line ++judgee.cache=false); did you mean "judge"?');
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++judge_rate_limit_per_s=2'] }))).toContain('did you mean "judge.rate_limit_per_s"?');
    const file = path.join(createTmpDir(), 'typo.yaml');
    writeFileSync(file, 'num_repeat: 3\n');
    expect(errorOf(() => loadConfig({ configPath: file, env: {} }))).toMatch(/unknown config key "num_repeat" \(from .*typo\.yaml\); did you mean "num_repeats"\?/);
  });

  it('suggest nothing for a key that is no near miss, and point at the config file instead', () => {
    for (const key of ['zzzzzz', 'sandbox_config.resources.swap_mib', 'judge.rate_limit']) {
      const message = errorOf(() => loadConfig({ env: {}, overrides: [`++${key}=1`] }));
      expect(message).toContain(`unknown config key "${key}"`);
      expect(message).not.toContain('did you mean');
      expect(message).toContain('check its spelling against');
    }
  });

  it('knows every key path of the schema, read off the schema itself', () => {
    const paths = configKeyPaths();
    expect(paths).toEqual(expect.arrayContaining(Object.keys(ConfigSchema.shape)));
    expect(paths).toEqual(expect.arrayContaining(['judge.rate_limit_per_s', 'sandbox_config.resources.memory_mib', 'babyvision.sha256', 'log_json', 'policy.max_calls_per_rollout']));
    // Every leaf path can be set: an override of it is never an unknown key.
    expect(new Set(paths).size).toBe(paths.length);
    expect(paths).not.toContain('policy.allowed_base_urls.0');
  });

  it('measures edits, counting a swap of neighbours as one, and keeps to small distances', () => {
    expect(editDistance('policy', 'polciy')).toBe(1);
    expect(editDistance('rate_limit_per_sec', 'rate_limit_per_s')).toBe(2);
    expect(editDistance('', 'abc')).toBe(3);
    expect(nearestKey('abcdef_x', ['abcdef_yyy'])).toBeNull(); // 3 edits: more than 2, and than a third of 8
    expect(nearestKey('abcdefghijkl_x', ['abcdefghijkl_yyy'])).toBe('abcdefghijkl_yyy'); // 3 edits: no more than a third of 14
    expect(nearestKey('known', ['known'])).toBeNull();
  });

  it('token capture settings: off by default; sampling fields pinned from the command line; fields the gateway decides refused by name', () => {
    expect(loadConfig({ env: {} }).policy).toMatchObject({ token_capture: false, sampling: {}, weight_version: null });
    const c = loadConfig({ env: {}, overrides: ['++policy.token_capture=true', '++policy.sampling.temperature=0.7', '++policy.sampling.top_k=20', '++policy.weight_version=step-3'] });
    expect(c.policy).toMatchObject({ token_capture: true, sampling: { temperature: 0.7, top_k: 20 }, weight_version: 'step-3' });
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++policy.sampling.max_tokens=99'] }))).toMatch(/policy\.sampling\.max_tokens.*not a sampling setting the run can pin/);
    expect(errorOf(() => loadConfig({ env: {}, overrides: ['++policy.sampling.stream=true'] }))).toMatch(/policy\.sampling\.stream/);
  });
});

