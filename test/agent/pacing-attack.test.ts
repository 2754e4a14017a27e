/**
 * The model cannot buy time with the gateway's holds: a chat call of its own (made with the token
 * it finds in OpenCode's environment) that the policy server answers 429 is passed back to it at
 * once, never held, and no wait is credited to the rollout; OpenCode's own calls are held as usual.
 * The real OpenCode in a real `local` sandbox, driven by a scripted hostile policy.
 */
import { rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentRunner } from '../../src/shared/ports/agent.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { RunStore } from '../../src/shared/stores/run-store.ts';
import { rolloutId } from '../../src/shared/queue/registry.ts';
import { loadPreparedBenchmark } from '../../src/prepare/load-prepared.ts';
import { produceRun } from '../../src/producer/produce.ts';
import { FIND_GATEWAY_TOKEN } from '../helpers/hostile-scripts.ts';
import { opencodeRoBinds } from '../../src/sandboxes/local/opencode-binary.ts';
import { createOpenCodeRunner } from '../../src/agent/opencode-runner.ts';
import { runRolloutStage, type RolloutStageDeps } from '../../src/workers/sandbox/rollout-stage.ts';
import { LocalBwrapProvider } from '../../src/sandboxes/local/provider.ts';
import { makeFleetEnv, REDIS_URL, type FleetEnv } from '../helpers/fleet.ts';
import { lastToolOutput, startScriptedPolicyServer, toolResults, type ScriptedPolicyServer, type ScriptReply } from '../helpers/scripted-policy-server.ts';
import { passableTmpDir } from '../helpers/tmp.ts';

const KEY = 'sk-policy-PACING-TEST-0004';
const ROOT = passableTmpDir('vcfleet-pace-attack-');

/** Python run by the model's bash tool: find the gateway token, send a chat call of its own, print the status and how long it took. */
const FORGE = String.raw`
import time
${FIND_GATEWAY_TOKEN}b = json.dumps({'model': 'x', 'messages': [{'role': 'user', 'content': 'buy me time'}]}).encode()
t = time.time()
s = socket.create_connection(('127.0.0.1', 18080), timeout=60)
s.sendall(f'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tok}\r\nContent-Type: application/json\r\nContent-Length: {len(b)}\r\nConnection: close\r\n\r\n'.encode() + b)
out = b''
while True:
    d = s.recv(65536)
    if not d: break
    out += d
print('forged', out.split(b'\r\n', 1)[0].decode(), 'after', round(time.time() - t), 's')
`;

describe('the model cannot buy time with held calls', () => {
  const logger = createLogger({ level: 'warn', secrets: [KEY] });
  let server: ScriptedPolicyServer;
  let runner: AgentRunner;
  let env: FleetEnv;
  let redis: Redis;

  beforeAll(async () => {
    server = await startScriptedPolicyServer({ modelName: 'scripted-vlm' });
    env = await makeFleetEnv({ rows: 1, judgeUrl: 'http://127.0.0.1:9/v1', overrides: ['++agent.kind=opencode', '++policy_model_name=scripted-vlm', `++policy_api_key=${KEY}`] });
    const config = env.config();
    const provider = new LocalBwrapProvider({ rootDir: path.join(ROOT, 'sandboxes'), workdir: '/workspace', extraRoBinds: opencodeRoBinds(config), logger });
    runner = createOpenCodeRunner({ config, logger, provider, socketDir: path.join(ROOT, 'sockets') });
    redis = createRedis(REDIS_URL, 'client');
  });
  afterAll(async () => {
    await runner?.close();
    await server?.close();
    redis?.disconnect();
    await env?.cleanup();
    rmSync(ROOT, { recursive: true, force: true });
  });

  /** Produce run `runId` of the first task and run its rollout stage through the real OpenCode. */
  async function rolloutOfOneTask(runId: string, pacing?: RolloutStageDeps['pacing']) {
    const config = env.config([`++run_id=${runId}`]);
    const bench = await loadPreparedBenchmark(config.data_dir, config.benchmark);
    await produceRun({ config, redis, logger, tasks: bench.tasks.slice(0, 1), readImage: bench.readImage });
    const task = bench.tasks[0];
    const job = { v: 1 as const, run_id: runId, task_id: task.task_id, repeat: 0, rollout_id: rolloutId(runId, task.task_id, 0) };
    const host = { policyBaseUrl: server.url, allowedBaseUrls: [], policyApiKey: KEY, captureRoot: path.join(ROOT, 'captures') };
    return runRolloutStage(job, { store: new RunStore(redis, env.prefix), agent: runner, host, pacing }, new AbortController().signal);
  }

  it("its own call's 429 comes back at once and earns no wait; OpenCode's own 429 is held and counted", async () => {
    let agentLimited = 0;
    server.setScript((body): ScriptReply => {
      // The model's own call (no tools): the server pushes back, asking for 30 s.
      if (!body.tools) return { kind: 'error', status: 429, headers: { 'retry-after': '30' }, body: { error: { message: 'slow down', code: 'rate_limit_exceeded' } } };
      if (toolResults(body) === 0) return { kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: `/usr/bin/python3 - <<'PYEOF'\n${FORGE}\nPYEOF` } }] };
      // OpenCode's second call: pushed back once (briefly), then answered.
      if (agentLimited++ === 0) return { kind: 'error', status: 429, headers: { 'retry-after-ms': '300' } };
      return { kind: 'text', text: `The tool said:\n${lastToolOutput(body)}\nSo \\boxed{C}.` };
    });
    const out = await rolloutOfOneTask('pace-attack');
    expect(out.next).toBe('judge');
    if (out.next !== 'judge') return;
    const o = out.job.outcome;
    expect(o).toMatchObject({ stop_reason: 'answered', extracted_answer: 'C', forged_calls: 1 });
    // The forged call got its 429 straight back (not after the 30 s the server asked for).
    expect(o.response_tail).toMatch(/forged HTTP\/1\.1 429 Too Many Requests after [0-9] s/);
    // Only OpenCode's held call counts: about its 0.3 s, never the forged call's 30 s.
    expect(o.policy_wait_s).toBeGreaterThanOrEqual(0.3);
    expect(o.policy_wait_s).toBeLessThan(30);
    expect(agentLimited).toBe(2);
  });

  it('after a call of its own, a wait past policy.max_wait_s is its timeout (scored 0), never a hand-back to the queue', async () => {
    let held = 0;
    server.setScript((body): ScriptReply => {
      // The model's own call is answered: it shares the server's limit, so what follows may be its doing.
      if (!body.tools) return { kind: 'text', text: 'sure' };
      if (toolResults(body) === 0) return { kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: `/usr/bin/python3 - <<'PYEOF'\n${FORGE}\nPYEOF` } }] };
      // OpenCode's next call: pushed back for ever.
      held++;
      return { kind: 'error', status: 429, headers: { 'retry-after-ms': '400' } };
    });
    const pace = { acquire: async () => {}, done: () => {}, holding: () => {}, sessionStarted: () => {}, sessionEnded: () => {} };
    // A hand-back would throw PolicyWaitExceeded out of the stage; the model's own doing is a scored row.
    const out = await rolloutOfOneTask('pace-attack-wait', () => ({ pace, maxWaitS: 2 }));
    // A timeout scores 0 without a judge call: straight to the results, a row that is not masked.
    expect(out.next).toBe('results');
    if (out.next !== 'results') return;
    const o = out.row;
    expect(o).toMatchObject({ stop_reason: 'timeout', reward: 0, failure_kind: null, forged_calls: 1 });
    expect(o.error).toMatch(/kept pushing back \(429\/503\): the agent's calls waited \d+ s, past policy\.max_wait_s=2, while the model made 1 call\(s\) of its own/);
    expect(held).toBeGreaterThanOrEqual(2);
  });
});
