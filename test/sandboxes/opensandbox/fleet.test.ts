/**
 * `vcfleet demo` and a short `vcfleet run` with `VCFLEET_SANDBOX_PROVIDER=opensandbox` against the
 * fake OpenSandbox server (which answers as the real one, runs commands as the image's user with
 * the request's env laid over the image's): preflight's trial sandbox passes, every rollout's real
 * OpenCode runs in a remote sandbox and is scored, and no sandbox is left.
 */
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRowsStrict } from '../../../src/shared/output/row-file.ts';
import { makeFleetEnv, REDIS_URL, runCli, type FleetEnv } from '../../helpers/fleet.ts';
import { startFakeOpenSandbox, type FakeOpenSandbox } from '../../helpers/fake-opensandbox-server.ts';
import { useScriptedJudge } from '../../helpers/scripted-judge-server.ts';
import { scripts, startScriptedPolicyServer, type ScriptedPolicyServer } from '../../helpers/scripted-policy-server.ts';
import { deletePrefix } from '../../helpers/redis-keys.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';

const KEY = 'fleet-opensandbox-key';

describe('the fleet on the opensandbox provider', () => {
  const judge = useScriptedJudge();
  const prefix = `vcftest-os-demo-${randomBytes(4).toString('hex')}`;
  let fake: FakeOpenSandbox;
  let policy: ScriptedPolicyServer;
  let env: FleetEnv;
  const providerEnv = (): Record<string, string> => ({
    VCFLEET_SANDBOX_PROVIDER: 'opensandbox', OPENSANDBOX_DOMAIN: fake.domain, OPENSANDBOX_API_KEY: KEY, VCFLEET_GATEWAY_HOST: '127.0.0.1',
  });
  beforeAll(async () => {
    fake = await startFakeOpenSandbox({ apiKey: KEY });
    policy = await startScriptedPolicyServer({ modelName: 'scripted-vlm', script: scripts.pythonThenAnswer('C') });
    env = await makeFleetEnv({
      rows: 2, judgeUrl: judge.url,
      overrides: ['++agent.kind=opencode', `++policy_base_url=${policy.url}`, '++policy_model_name=scripted-vlm', '++policy_api_key=sk-policy-OS-0001'],
    });
  });
  afterAll(async () => {
    await policy?.close();
    await fake?.close();
    await env?.cleanup();
    const redis = new Redis(REDIS_URL);
    await deletePrefix(redis, prefix);
    redis.disconnect();
    removeTmpDirs();
  });

  const created = (): number => fake.requests.filter((r) => r.method === 'POST' && r.path === '/v1/sandboxes').length;
  const left = (): string[] => [...fake.sandboxes.values()].filter((s) => !s.deleted).map((s) => s.id);

  it('vcfleet demo: four puzzles through the real OpenCode in remote sandboxes, scored as the local demo', async () => {
    const dir = createTmpDir('vcfleet-os-demo-');
    const demo = await runCli(['demo', `++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`, `++state_dir=${path.join(dir, 'state')}`,
      `++output_root=${dir}`, '++preflight.require_redis_persistence=false'], { TMPDIR: dir, ...providerEnv() });
    expect(demo.code, demo.output).toBe(0);
    expect(demo.output).toContain('complete: all 4 rollouts scored');
    expect(demo.output).toMatch(/mean\/reward\s+75\.0%/);
    const runId = /demo run (demo-[\w-]+): 4 synthetic puzzles/.exec(demo.output)![1];
    const rows = readRowsStrict(path.join(dir, 'results', 'demo', `${runId}.jsonl`));
    expect(rows.map((r) => r.stop_reason)).toEqual(['answered', 'answered', 'answered', 'answered']);
    // The preflight's trial sandbox and one per rollout, all deleted.
    expect(created()).toBe(5);
    expect(left()).toEqual([]);
  }, 300_000);

  it('vcfleet run: each rollout\'s OpenCode runs python in its sandbox and answers; none masked, no sandbox left', async () => {
    const before = created();
    policy.requests.length = 0;
    const run = await runCli(['run', '--run-id', `os-run-${randomBytes(3).toString('hex')}`, ...env.overrides], providerEnv());
    expect(run.code, run.output).toBe(0);
    const rows = readRowsStrict(env.output);
    expect(rows).toHaveLength(2);
    for (const row of rows) expect(row, JSON.stringify(row)).toMatchObject({ stop_reason: 'answered', extracted_answer: 'C', tool_calls: 1, failure_kind: null, error: null });
    expect(created() - before).toBe(3);
    expect(left()).toEqual([]);
    // The model's python ran in the sandbox: its output came back to the model as a tool result.
    expect(policy.requests.length).toBeGreaterThanOrEqual(4);
  }, 300_000);
});
