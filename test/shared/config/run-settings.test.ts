/**
 * Run settings and host settings, as users on several hosts meet them (every command its own OS
 * process): `produce` prints what it froze and names what a second `produce` would have changed;
 * `run-set` changes run settings before rollouts finished, refuses after unless `--force`, refuses
 * host and fixed settings, and workers follow the change; a worker whose own configuration differs
 * says so once per run; the fleet's rollout cap changes with `fleet-set`, never with a worker.
 */
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { configKeyPaths } from '../../../src/shared/config/key-paths.ts';
import { ConfigSchema, SECRET_PATHS } from '../../../src/shared/config/schema.ts';
import { openQueue } from '../../../src/shared/queue/registry.ts';
import { RUN_SETTING_KEYS, RunSettingsSchema, runSettingsFrom, valueAt } from '../../../src/shared/config/run-settings.ts';
import { RunStore, runSettings } from '../../../src/shared/stores/run-store.ts';
import { useScriptedJudge } from '../../helpers/scripted-judge-server.ts';
import { countLines, readJsonl } from '../../faults/fault-helpers.ts';
import { makeFleetEnv, REDIS_URL, runCli, startCli, waitFor, type CliProcess, type FleetEnv } from '../../helpers/fleet.ts';
import { removeTmpDirs } from '../../helpers/tmp.ts';

describe('the run-setting keys', () => {
  it('name config keys, and cover every leaf of the run settings exactly once', () => {
    const keys = configKeyPaths();
    for (const { key } of RUN_SETTING_KEYS) expect(keys, key).toContain(key);
    // A run record is stored and shown: no secret is ever a run setting.
    for (const { key } of RUN_SETTING_KEYS) expect(SECRET_PATHS, key).not.toContain(key);
    const settings = runSettingsFrom(ConfigSchema.parse({}));
    // A map of fields the run chooses (policy.sampling) is one setting, whatever it holds.
    const MAPS = ['policy.sampling'];
    const leaves = (o: object, at: string[] = []): string[] =>
      Object.entries(o).flatMap(([k, v]) => (v !== null && typeof v === 'object' && !MAPS.includes([...at, k].join('.')) ? leaves(v, [...at, k]) : [[...at, k].join('.')]));
    const covered = RUN_SETTING_KEYS.map((k) => k.path.join('.'));
    expect(covered.sort()).toEqual(leaves(settings).filter((l) => l !== 'settings_version').sort());
    expect(new Set(covered).size).toBe(covered.length);
    expect(RunSettingsSchema.parse(settings)).toEqual(settings);
  });

  it('store an endpoint without its credentials', () => {
    const config = ConfigSchema.parse({ policy: { endpoint: 'http://user:pw@vllm:8000/v1' } });
    expect(valueAt(runSettingsFrom(config), ['policy', 'endpoint'])).toBe('http://vllm:8000/v1');
  });
});

describe('run settings and host settings across processes', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  const redis = new Redis(REDIS_URL);
  const procs: CliProcess[] = [];
  beforeAll(async () => {
    env = await makeFleetEnv({ rows: 4, judgeUrl: judge.url, overrides: ['++queues.rollout_global_concurrency=7'] });
  });
  afterAll(async () => {
    for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
    await env?.cleanup();
    redis.disconnect();
    removeTmpDirs();
  });
  const store = () => new RunStore(redis, env.prefix);
  /** What run-set and fleet-set need to reach the fleet (as REDIS_URL and VCFLEET_PREFIX would). */
  const fleet = () => [`++redis_url=${REDIS_URL}`, `++queues.prefix=${env.prefix}`];
  /** Each test's run has an output file of its own (under the results host's output_root). */
  const outputOf = (runId: string) => path.join(env.dir, 'out', `${runId}.jsonl`);
  async function produce(runId: string, ...extra: string[]) {
    const out = await runCli(['produce', '--run-id', runId, ...env.overrides, `++output_jsonl_fpath=${outputOf(runId)}`, ...extra]);
    expect(out.code, out.output).toBe(0);
    return out;
  }
  /** The three roles as processes of their own, until `stop`; the sandbox-worker with `sandboxExtra`. */
  function serve(...sandboxExtra: string[]) {
    const started = [startCli(['worker', 'sandbox', ...env.overrides, ...sandboxExtra]), startCli(['worker', 'judge', ...env.overrides]), startCli(['worker', 'results', ...env.overrides, `++output_root=${env.dir}`])];
    procs.push(...started);
    return {
      sandbox: started[0],
      async stop() {
        for (const p of started) p.child.kill('SIGTERM');
        await Promise.all(started.map((p) => p.exited));
      },
    };
  }

  it('produce prints the settings it froze; producing again with others names each difference and the fix', async () => {
    const first = await produce('rs-produce', '++limit=1', '++task_timeout_s=1200');
    expect(first.stdout).toMatch(/run settings of rs-produce \(frozen in the run record; every worker uses these; change with `node bin\/vcfleet\.js run-set --run-id rs-produce \+\+key=value( \+\+\S+)*`\)/);
    expect(first.stdout).toMatch(/^ {2}task_timeout_s +1200$/m);
    expect(first.stdout).toMatch(/^ {2}visual_coding_opencode_judge_model_name +gpt-4o-mini$/m);
    const again = await produce('rs-produce', '++limit=1', '++task_timeout_s=600');
    expect(again.stdout).toContain('run rs-produce existed with other settings; it keeps its own:');
    expect(again.stdout).toMatch(/^ {2}task_timeout_s +run: 1200 +yours: 600$/m);
    expect(again.stdout).toContain('node bin/vcfleet.js run-set --run-id rs-produce ++task_timeout_s=600');
    expect(runSettings((await store().getRun('rs-produce'))!).task_timeout_s).toBe(1200);
  });

  it('run-set refuses host settings and the settings that make the rollouts, naming why', async () => {
    await produce('rs-refuse', '++limit=1');
    const host = await runCli(['run-set', '--run-id', 'rs-refuse', ...fleet(), '++policy_base_url=http://elsewhere:8000/v1']);
    expect(host.code).toBe(2);
    expect(host.output).toContain('policy_base_url is a host setting: every host reads it from its own configuration');
    const fixed = await runCli(['run-set', '--run-id', 'rs-refuse', ...fleet(), '++num_repeats=3']);
    expect(fixed.code).toBe(2);
    expect(fixed.output).toContain("num_repeats makes the run's rollouts and cannot change: produce a new run");
    const none = await runCli(['run-set', '--run-id', 'nope', ...fleet(), '++task_timeout_s=60']);
    expect(none.code).toBe(2);
    expect(none.output).toContain('run nope does not exist');
  });

  it('run-set before any rollout finished changes the run; workers follow it, and one whose configuration differs says so once', async () => {
    await produce('rs-before', '++task_timeout_s=1200');
    const set = await runCli(['run-set', '--run-id', 'rs-before', ...fleet(), '++policy_model_name=fixed-vlm', '++task_timeout_s=900']);
    expect(set.code, set.output).toBe(0);
    expect(set.stdout).toContain('policy_model_name: policy -> fixed-vlm');
    expect(set.stdout).toContain('task_timeout_s: 1200 -> 900');
    const record = (await store().getRun('rs-before'))!;
    expect(record).toMatchObject({ policy_model: 'fixed-vlm', settings_changes: [{ forced: false, finished_rollouts: 0 }] });
    expect(record.settings_changes[0].changes).toEqual([
      { key: 'task_timeout_s', from: 1200, to: 900 },
      { key: 'policy_model_name', from: 'policy', to: 'fixed-vlm' },
    ]);
    // A sandbox host still configured with the old model, and with a cap of its own that it must not impose.
    const roles = serve('++policy_model_name=stale-vlm', '++queues.rollout_global_concurrency=1');
    try {
      await waitFor('4 rows', () => countLines(outputOf('rs-before')) >= 4, 60_000, 200);
      expect(readJsonl(outputOf('rs-before')).map((r) => r.policy_model)).toEqual(['fixed-vlm', 'fixed-vlm', 'fixed-vlm', 'fixed-vlm']);
      const warnings = roles.sandbox.output().split('\n').filter((l) => l.includes('has policy_model_name=fixed-vlm (a run setting, used)'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain("this sandbox-worker's configuration says stale-vlm");
      const status = await runCli(['status', '--run-id', 'rs-before', ...fleet()]);
      expect(status.stdout).toMatch(new RegExp(`^output: ${outputOf('rs-before').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} on host ${os.hostname()} \\(results consumer \\S+\\)$`, 'm'));
      const queue = openQueue('rollout', redis, env.prefix);
      expect(await queue.getGlobalConcurrency()).toBe(7); // produce's, not the worker's 1
      await queue.close();
    } finally {
      await roles.stop();
    }
  });

  it('run-set after rollouts finished is refused unless --force, and a forced change is recorded', async () => {
    await produce('rs-after');
    const roles = serve();
    try {
      await waitFor('4 rows', () => countLines(outputOf('rs-after')) >= 4, 60_000, 200);
    } finally {
      await roles.stop();
    }
    const refused = await runCli(['run-set', '--run-id', 'rs-after', ...fleet(), '++agent.max_tool_calls=5']);
    expect(refused.code).toBe(2);
    expect(refused.output).toContain('run rs-after has 4 finished rollouts made with its current settings; changing agent.max_tool_calls 200 -> 5 now would mix two settings in one run');
    const forced = await runCli(['run-set', '--run-id', 'rs-after', '--force', ...fleet(), '++agent.max_tool_calls=5']);
    expect(forced.code, forced.output).toBe(0);
    expect(forced.stdout).toContain('(forced, after 4 finished rollouts; recorded)');
    const record = (await store().getRun('rs-after'))!;
    expect(record.settings_changes).toHaveLength(1);
    expect(record.settings_changes[0]).toMatchObject({ forced: true, finished_rollouts: 4, changes: [{ key: 'agent.max_tool_calls', from: 200, to: 5 }] });
    const same = await runCli(['run-set', '--run-id', 'rs-after', ...fleet(), '++agent.max_tool_calls=5']);
    expect(same.stdout).toContain('already has these settings; nothing changed');
  });

  it('fleet-set changes the fleet-wide rollout cap, and only that', async () => {
    const queue = openQueue('rollout', redis, env.prefix);
    const before = await queue.getGlobalConcurrency();
    const set = await runCli(['fleet-set', ...fleet(), '++queues.rollout_global_concurrency=3']);
    expect(set.code, set.output).toBe(0);
    expect(set.stdout).toContain(`the fleet's rollout queue (prefix ${env.prefix}): at most 3 rollouts at once over all workers (was ${before ?? 'unset'})`);
    expect(await queue.getGlobalConcurrency()).toBe(3);
    const other = await runCli(['fleet-set', ...fleet(), '++queues.rollout_global_concurrency=3', '++task_timeout_s=5']);
    expect(other.code).toBe(2);
    expect(other.output).toContain('fleet-set sets ++queues.rollout_global_concurrency=N only, not task_timeout_s');
    // Put back what produce set, for whichever test runs next.
    if (before !== null) await queue.setGlobalConcurrency(before);
    await queue.close();
  });
});
