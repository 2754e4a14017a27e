/**
 * A rate-limited policy server is a pace, not a failure: the real OpenCode in real `local`
 * sandboxes against scripted servers that limit their callers (src/demo/scripted-policy-limits.ts).
 * A token bucket answering 429 + Retry-After: every row scored, no session restarted, the 429 share
 * small; two sandbox-workers sharing one `policy.rate_limit.requests_per_min` through Redis; and a
 * key whose quota is gone pauses the run, saying so, with no row masked.
 */
import path from 'node:path';
import { rmSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runAll } from '../../src/all-in-one/run-all.ts';
import type { AgentRunner } from '../../src/shared/ports/agent.ts';
import type { Config } from '../../src/shared/config/load.ts';
import { opencodeRoBinds } from '../../src/sandboxes/local/opencode-binary.ts';
import { createOpenCodeRunner } from '../../src/agent/opencode-runner.ts';
import { LocalBwrapProvider } from '../../src/sandboxes/local/provider.ts';
import { emptyLimitCounts, quotaGone, rateLimited } from '../../src/demo/scripted-policy-limits.ts';
import { startScriptedPolicyServer, toolResults, type Script, type ScriptedPolicyServer } from '../helpers/scripted-policy-server.ts';
import { startInProcessFleet } from '../helpers/in-process-fleet.ts';
import { FAKE_POLICY_KEY, waitFor, type FleetEnv } from '../helpers/fleet.ts';
import { passableTmpDir } from '../helpers/tmp.ts';
import { faultFleet } from './fault-fleet.ts';
import { readJsonl } from './fault-helpers.ts';

const quiet = { update() {}, stop() {} };
const ROOT = passableTmpDir('vcfleet-pacing-');

/** Two calls a rollout: one tool call, then an answer. Counts the first calls answered (one per session started). */
function twoCalls(firsts: { n: number }): Script {
  return (body) => {
    if (toolResults(body) === 0) {
      firsts.n++;
      return { kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: 'echo looked', description: 'look' } }] };
    }
    return { kind: 'text', text: 'So it is \\boxed{A}.' };
  };
}

describe('pacing a rate-limited policy server (real OpenCode)', () => {
  const f = faultFleet();
  let server: ScriptedPolicyServer;
  const runners: AgentRunner[] = [];

  beforeAll(async () => {
    server = await startScriptedPolicyServer({ modelName: 'scripted-vlm' });
  });
  afterEach(async () => {
    for (const r of runners.splice(0)) await r.close();
  });
  afterAll(async () => {
    await server.close();
    rmSync(ROOT, { recursive: true, force: true });
  });

  function runner(config: Config, name: string): AgentRunner {
    const logger = f.current!.logger;
    const provider = new LocalBwrapProvider({ rootDir: path.join(ROOT, name, 'sandboxes'), workdir: '/workspace', extraRoBinds: opencodeRoBinds(config), logger });
    const r = createOpenCodeRunner({ config, logger, provider, socketDir: path.join(ROOT, name, 'sockets') });
    runners.push(r);
    return r;
  }

  async function env(rows: number, extra: string[]): Promise<{ e: FleetEnv }> {
    const e = await f.env({
      rows,
      overrides: ['++agent.kind=opencode', `++policy_base_url=${server.url}`, '++policy_model_name=scripted-vlm', `++policy_api_key=${FAKE_POLICY_KEY}`,
        '++policy.context_window=64000', '++policy.max_output_tokens=2048', '++task_timeout_s=300', ...extra],
    });
    return { e };
  }

  it('a token bucket answering 429 + Retry-After: every row scored, no session restarted, few calls answered 429', async () => {
    const { e } = await env(4, ['++queues.rollout_concurrency=4']);
    const counts = emptyLimitCounts();
    const firsts = { n: 0 };
    server.setScript(rateLimited(twoCalls(firsts), { perS: 0.5, burst: 1 }, counts));
    const config = e.config(['++run_id=pace1']);
    const result = await runAll({ config, logger: e.logger, agent: runner(config, 'one'), progress: quiet });
    expect(result.status).toBe('complete');
    const rows = readJsonl(e.output);
    expect(rows).toHaveLength(4);
    expect(rows.filter((r) => r.failure_kind !== null)).toEqual([]);
    expect(rows.every((r) => r.reward !== null)).toBe(true);
    // One first answer per rollout: no session was thrown away and started again.
    expect(firsts.n).toBe(4);
    // The calls the server pushed back were held: their wait is in the rows.
    expect(counts.limited).toBeGreaterThan(0);
    expect(rows.reduce((n, r) => n + (r.policy_wait_s as number), 0)).toBeGreaterThan(0.5);
    const share = counts.limited / counts.calls;
    console.log(`[fault] 1 call per 2 s (burst 1), 4 rollouts at once: ${counts.limited}/${counts.calls} calls answered 429 (${(100 * share).toFixed(0)}%), ${firsts.n} sessions for 4 rollouts`);
    expect(share).toBeLessThan(0.5);
  });

  it('two sandbox-workers share one requests_per_min through Redis: the server is never pushed past it', async () => {
    const { e } = await env(4, ['++queues.rollout_concurrency=2', '++policy.rate_limit.requests_per_min=27']);
    const counts = emptyLimitCounts();
    const firsts = { n: 0 };
    server.setScript(rateLimited(twoCalls(firsts), { perS: 0.5, burst: 1 }, counts));
    const config = e.config(['++run_id=pace2']);
    const fleet = startInProcessFleet(e, config);
    try {
      await fleet.produce(config);
      await fleet.sandbox(runner(config, 'a'), config);
      await fleet.sandbox(runner(config, 'b'), config);
      await fleet.judge(config);
      await fleet.results(config);
      await waitFor('four rows', async () => (await fleet.client.hlen(`${e.prefix}:run:pace2:rows`)) >= 4, 240_000, 500);
    } finally {
      await fleet.close();
    }
    expect(firsts.n).toBe(4);
    console.log(`[fault] two workers, requests_per_min=27 against 1 call per 2 s (burst 1): ${counts.limited}/${counts.calls} calls answered 429`);
    // The shared limit is a little under the server's: at most a 429 at the edge of its bucket.
    expect(counts.limited).toBeLessThanOrEqual(1);
  });

  it('insufficient_quota pauses the run, saying so; no row is masked', async () => {
    const { e } = await env(2, ['++queues.rollout_concurrency=1', '++queues.fail_fast_after=0']);
    server.setScript(quotaGone());
    const config = e.config(['++run_id=pace3']);
    const result = await runAll({ config, logger: e.logger, agent: runner(config, 'q'), progress: quiet });
    expect(result.status).toBe('paused');
    expect(result.reason).toMatch(/quota is gone \(insufficient_quota/);
    expect(result.masked).toBe(0);
  });
});
