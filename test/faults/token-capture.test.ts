/**
 * Token capture under a fault: the sandbox-worker SIGKILLed while OpenCode runs (after the first
 * policy call of the rollout) leaves no half trajectory anywhere, in Redis or beside the JSONL; the
 * rollout's next attempt on another worker delivers one whole trajectory of its own calls.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fleetKeys } from '../../src/shared/redis/keys.ts';
import { TrajectorySchema } from '../../src/shared/records/trajectory.ts';
import { toolResults } from '../helpers/scripted-policy-server.ts';
import { FAKE_POLICY_KEY, runCli, startCli, waitFor, type CliProcess, type FleetEnv } from '../helpers/fleet.ts';
import { createTmpDir } from '../helpers/tmp.ts';
import { startVllmPolicyServer, type VllmPolicyServer } from '../helpers/vllm-policy-server.ts';
import { faultFleet } from './fault-fleet.ts';
import { countLines, readJsonl } from './fault-helpers.ts';

describe('token capture under faults', () => {
  const f = faultFleet();
  let policy: VllmPolicyServer;
  let tmp: string;
  beforeAll(async () => {
    policy = await startVllmPolicyServer(() => ({ kind: 'text', text: 'unused' }));
  });
  afterAll(async () => {
    await policy.close();
  });

  function role(name: string, e: FleetEnv): CliProcess {
    const p = startCli(['worker', name, ...e.overrides], { TMPDIR: tmp, POLICY_API_KEY: FAKE_POLICY_KEY });
    f.procs.push(p);
    return p;
  }

  it('sandbox-worker SIGKILLed mid-rollout: no half trajectory; the retried rollout delivers one whole trajectory', async () => {
    tmp = createTmpDir('vcfleet-tc-fault-');
    const e = await f.env({
      rows: 1,
      overrides: ['++agent.kind=opencode', `++policy_base_url=${policy.url}`, '++policy_model_name=toy', '++policy.token_capture=true',
        '++policy.context_window=64000', '++policy.max_output_tokens=2048', '++task_timeout_s=150'],
    });
    const gold = e.fixture.expected[0].gold;
    policy.setScript((body) =>
      toolResults(body) === 0
        ? { kind: 'tool_calls', text: 'Waiting.', calls: [{ name: 'bash', arguments: { command: 'sleep 6 && echo measured', description: 'wait' } }] }
        : { kind: 'text', text: `It is \\boxed{${gold}}.` },
    );
    expect((await runCli(['produce', '--run-id', 'tck', ...e.overrides])).code).toBe(0);
    const victim = role('sandbox', e);
    await waitFor('the first policy call', () => policy.requests.some((b) => b.messages?.[0]?.content !== 'ping'), 90_000, 100);
    await sleep(1000);
    victim.child.kill('SIGKILL');
    await victim.exited;
    // Nothing of the killed attempt's trajectory is anywhere: the worker keeps it only once a rollout finished.
    const keys = fleetKeys(e.prefix);
    const rollout = (await f.redis.hkeys(keys.outcomes('tck'))).length;
    expect(rollout).toBe(0);
    const pending = await f.redis.keys(`${e.prefix}:run:tck:transcript:*`);
    for (const k of pending) expect(await f.redis.hexists(k, 'trajectory')).toBe(0);
    const trajectories = path.join(path.dirname(e.output), 'results_trajectories');
    expect(existsSync(trajectories) ? readdirSync(trajectories) : []).toEqual([]);
    // The agent's calls (not the workers' own one-token preflight calls).
    const agentCalls = () => policy.requests.filter((b) => b.messages?.[0]?.content !== 'ping').length;
    const firstAttemptCalls = agentCalls();

    role('sandbox', e);
    role('judge', e);
    role('results', e);
    await waitFor('1 row', () => countLines(e.output) >= 1, 150_000, 250);
    const [row] = readJsonl(e.output) as Array<{ trajectory: string; reward: number; token_capture: unknown }>;
    expect(row).toMatchObject({ reward: 1, token_capture: { calls: 2, contiguous: true, mask_sample: false, mask_reason: null } });
    expect(readdirSync(trajectories).filter((n) => !n.endsWith('.json'))).toEqual([]); // no temporary file left
    const t = TrajectorySchema.parse(JSON.parse(readFileSync(path.join(path.dirname(e.output), row.trajectory), 'utf8')));
    expect(t).toMatchObject({ reward: 1, mask_sample: false, flat_calls: 2 });
    expect(t.calls).toHaveLength(agentCalls() - firstAttemptCalls);
    expect(t.response_ids).toHaveLength(t.response_mask.length);
    await waitFor('the trajectory removed from Redis once written', async () => (await f.redis.keys(`${e.prefix}:run:tck:transcript:*`)).length === 0, 10_000, 100);
  });
});
