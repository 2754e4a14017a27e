/**
 * A run's settings are decided before it is created, and kept: `vcfleet serve --with-workers` whose
 * preflight fails creates no run; an existing run asked to serve (or run) with another value of a
 * setting named on the command line is refused with exit 2, naming the setting, both values and how
 * to start a new run; `--update-settings` changes it while no rollout of it finished. Real Redis, the
 * CLI as its own process.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceRun } from '../../src/producer/produce.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { RunStore, runSettings } from '../../src/shared/stores/run-store.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { startScriptedPolicyServer, type ScriptedPolicyServer } from '../helpers/scripted-policy-server.ts';
import { CLI, makeFleetEnv, REDIS_URL, runCli, startCli, waitFor, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

describe('a run keeps the settings it was made with', () => {
  const judge = useScriptedJudge();
  let policy: ScriptedPolicyServer;
  let env: FleetEnv;
  let redis: Redis;
  beforeAll(async () => {
    policy = await startScriptedPolicyServer({ modelName: 'served-vlm' });
    redis = createRedis(REDIS_URL, 'client');
    env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url });
  });
  afterAll(async () => {
    await env.cleanup();
    await policy.close();
    redis.disconnect();
    removeTmpDirs();
  });
  const store = () => new RunStore(redis, env.prefix);

  it('serve --with-workers whose preflight fails (token capture against a server without token fields) creates no run', async () => {
    const r = await runCli(['serve', '--with-workers', '--port', '0', '--run-id', 'grpo-1', ...env.overrides,
      '++agent.kind=opencode', '++policy_model_name=served-vlm', `++policy_base_url=${policy.url}`, '++policy.token_capture=true']);
    expect(r.code, r.output).toBe(2);
    expect(r.output).toContain('policy.token_capture needs a server that returns token ids');
    expect(await store().getRun('grpo-1')).toBeNull();
  }, 120_000);

  it('an existing run asked for another value of a setting: exit 2 naming it, both values and a new run; --update-settings changes it', async () => {
    const config = env.config(['++run_id=grpo-2', '++policy.token_capture=true']);
    await createServiceRun({ config, redis, logger: env.logger });
    const refused = await runCli(['serve', '--port', '0', '--run-id', 'grpo-2', ...env.overrides, '++policy.token_capture=false']);
    expect(refused.code, refused.output).toBe(2);
    expect(refused.output).toContain('run grpo-2 was made with policy.token_capture=true (this command asks for false); a run keeps its settings');
    expect(refused.output).toContain(`Start a new run with another id (\`${CLI} serve --run-id NEW ++policy.token_capture=false`);
    expect(refused.output).toContain('or pass --update-settings to change run grpo-2');
    expect(runSettings((await store().getRun('grpo-2'))!).policy.token_capture).toBe(true);
    // The same value, or no value named: served as it is (the run's own setting).
    const served = startCli(['serve', '--port', '0', '--run-id', 'grpo-2', ...env.overrides, '--update-settings', '++policy.token_capture=false']);
    try {
      await waitFor('serve to start', async () => served.stdout().includes('serve: http://'), 60_000, 200);
    } finally {
      served.child.kill('SIGTERM');
      await served.exited;
    }
    const record = (await store().getRun('grpo-2'))!;
    expect(runSettings(record).policy.token_capture).toBe(false);
    expect(record.settings_changes.at(-1)?.changes).toEqual([{ key: 'policy.token_capture', from: true, to: false }]);
  }, 120_000);

  it('vcfleet run --run-id of an existing run with another ++setting: exit 2 before anything starts', async () => {
    const made = await runCli(['run', '--run-id', 'held-run', ...env.overrides, '++task_timeout_s=1200']);
    expect(made.code, made.output).toBe(0);
    const again = await runCli(['run', '--run-id', 'held-run', ...env.overrides, '++task_timeout_s=600']);
    expect(again.code, again.output).toBe(2);
    expect(again.output).toContain('run held-run was made with task_timeout_s=1200 (this command asks for 600)');
    // Resumed without naming it: the run's own value, no refusal.
    const resumed = await runCli(['run', '--run-id', 'held-run', ...env.overrides]);
    expect(resumed.code, resumed.output).toBe(0);
  }, 120_000);
});
