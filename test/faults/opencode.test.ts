/**
 * Faults with the real agent: the real OpenCode binary in real `local` (bubblewrap) sandboxes,
 * driven by the scripted policy server, every role a `vcfleet` OS process. Each process gets its own
 * TMPDIR, so its sandbox folders (`$TMPDIR/vcfleet-sandboxes`) and gateway sockets are this test's
 * alone and can be checked for leftovers. Five OpenCode sessions in all (~10-30 s each).
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { scripts, startScriptedPolicyServer, toolResults, lastToolOutput, type ScriptedPolicyServer, type Script } from '../helpers/scripted-policy-server.ts';
import { FAKE_JUDGE_KEY, FAKE_POLICY_KEY, REDIS_URL, runCli, startCli, waitFor, type CliProcess, type FleetEnv } from '../helpers/fleet.ts';
import { createTmpDir } from '../helpers/tmp.ts';
import { faultFleet } from './fault-fleet.ts';
import { countLines, descendants, dumpPrefix, expectOneRowEach, processesMentioning, readJsonl, readTree, stillAlive } from './fault-helpers.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const SENTINEL = 'worker-env-sentinel-5d1e';

describe('real OpenCode in local sandboxes under faults', () => {
  const f = faultFleet();
  let policy: ScriptedPolicyServer;
  let tmp: string;
  beforeAll(async () => {
    policy = await startScriptedPolicyServer();
  });
  afterAll(async () => {
    await policy.close();
  });
  afterEach(() => {
    policy.requests.length = 0;
  });

  async function setup(policyUrl: string, extra: string[] = []) {
    tmp = createTmpDir('vcfleet-oc-fault-');
    return f.env({
      rows: 1,
      overrides: ['++agent.kind=opencode', `++policy_base_url=${policyUrl}`, '++policy_model_name=scripted-vlm', '++policy.capture=true',
        '++policy.context_window=64000', '++policy.max_output_tokens=2048', '++task_timeout_s=150', ...extra],
    });
  }

  /** A worker process as an operator starts it: keys in the environment, its own TMPDIR. */
  function role(name: string, e: FleetEnv): CliProcess {
    const p = startCli(['worker', name, ...e.overrides], { TMPDIR: tmp, POLICY_API_KEY: FAKE_POLICY_KEY, VCFLEET_SENTINEL: SENTINEL });
    f.procs.push(p);
    return p;
  }

  function leftovers() {
    const sandboxRoot = path.join(tmp, 'vcfleet-sandboxes');
    return {
      sandboxes: existsSync(sandboxRoot) ? readdirSync(sandboxRoot) : [],
      gateways: readdirSync(tmp).filter((n) => n.startsWith('vcfleet-gw-')),
    };
  }

  async function stopAll(): Promise<void> {
    for (const p of f.procs) if (p.child.exitCode === null) p.child.kill('SIGTERM');
    await Promise.all(f.procs.map((p) => p.exited));
  }

  it('sandbox-worker SIGKILLed while OpenCode runs: nothing survives, another worker reaps and finishes', async () => {
    const e = await setup(policy.url);
    const gold = e.fixture.expected[0].gold;
    policy.setScript((body) =>
      toolResults(body) === 0
        ? { kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: 'sleep 6 && echo measured', description: 'wait' } }] }
        : { kind: 'text', text: `It is \\boxed{${gold}}.` },
    );
    expect((await runCli(['produce', '--run-id', 'ock', ...e.overrides])).code).toBe(0);
    const victim = role('sandbox', e);
    // The first policy call made the model start `sleep`: OpenCode and its tool run in the sandbox.
    await waitFor('OpenCode running a tool', () => policy.requests.filter((r) => r.path.endsWith('/chat/completions')).length >= 1, 90_000, 100);
    await sleep(1500);
    const tree = descendants(victim.child.pid!);
    expect(tree.some((p) => p.cmd.includes('bwrap'))).toBe(true);
    expect(tree.some((p) => /opencode/.test(p.cmd))).toBe(true);
    expect(leftovers().sandboxes.length).toBe(1);
    victim.child.kill('SIGKILL');
    await victim.exited;
    // bwrap dies with its parent (--die-with-parent) and takes its PID namespace with it.
    await waitFor('the victim\'s sandbox processes to die', () => stillAlive(tree).length === 0, 10_000, 100);
    expect(leftovers().sandboxes.length).toBe(1); // the folder waits for the reaper
    const rescuer = role('sandbox', e);
    role('judge', e);
    role('results', e);
    await waitFor('the orphan reaped', () => rescuer.output().includes('removed sandboxes left behind'), 60_000, 100);
    await waitFor('1 row', () => countLines(e.output) >= 1, 150_000, 250);
    const rows = readJsonl(e.output);
    expectOneRowEach(rows, 'ock', e.fixture);
    expect(rows[0]).toMatchObject({ reward: 1, stop_reason: 'answered', failure_kind: null, tool_calls: 1 });
    await stopAll();
    expect(leftovers()).toEqual({ sandboxes: [], gateways: [] });
    expect(processesMentioning(tmp)).toEqual([]);
  });

  it('policy server down, then back: InfraError, the rollout retried with backoff, then it completes', async () => {
    const down = await startScriptedPolicyServer();
    const { port, url } = down;
    await down.close();
    // The worker starts while the policy server is down (its start-up check would refuse that).
    const e = await setup(url, ['++queues.rollout_backoff_ms=3000', '++preflight.enabled=false']);
    const gold = e.fixture.expected[0].gold;
    expect((await runCli(['produce', '--run-id', 'ocd', ...e.overrides])).code).toBe(0);
    const worker = role('sandbox', e);
    role('judge', e);
    role('results', e);
    await waitFor('the first attempt to fail', () => /rollout job failed/.test(worker.output()), 150_000, 250);
    const back = await startScriptedPolicyServer({ port, script: scripts.pythonThenAnswer(gold) });
    try {
      await waitFor('1 row', () => countLines(e.output) >= 1, 150_000, 250);
      const failed = worker.output().split('\n').find((l) => l.includes('rollout job failed'))!;
      expect(failed).toMatch(/"retryable":true/);
      expect(failed).toMatch(/connection_refused|policy server/);
      const rows = readJsonl(e.output);
      expectOneRowEach(rows, 'ocd', e.fixture);
      expect(rows[0]).toMatchObject({ reward: 1, stop_reason: 'answered', failure_kind: null });
      expect(back.requests.length).toBeGreaterThanOrEqual(2);
      await stopAll();
      expect(leftovers()).toEqual({ sandboxes: [], gateways: [] });
      expect(processesMentioning(tmp)).toEqual([]);
    } finally {
      await back.close();
    }
  });

  it('a model that exhausts its memory is scored, not masked: the kill reaches it as tool output (or names the limit), and the row counts the hit', async () => {
    const e = await setup(policy.url, ['++sandbox_config.resources.memory_mib=1536', '++sandbox_config.resources.disk_mib=256']);
    const gold = e.fixture.expected[0].gold;
    const hog = 'python3 -c "import numpy as np\na = []\nwhile True: a.append(np.ones(8 * 1024 * 1024))"; echo "exit $?"';
    policy.setScript((body) =>
      toolResults(body) === 0
        ? { kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: hog, description: 'use all the memory' } }] }
        : { kind: 'text', text: `After that: ${lastToolOutput(body).slice(0, 200)} \\boxed{${gold}}` },
    );
    expect((await runCli(['produce', '--run-id', 'ocm', ...e.overrides])).code).toBe(0);
    const worker = role('sandbox', e);
    role('judge', e);
    role('results', e);
    await waitFor('1 row', () => countLines(e.output) >= 1, 150_000, 250);
    const rows = readJsonl(e.output);
    expectOneRowEach(rows, 'ocm', e.fixture);
    const row = rows[0];
    console.log(`[fault] memory hog row: ${JSON.stringify({ stop_reason: row.stop_reason, reward: row.reward, limit_hits: row.limit_hits, error: row.error })}`);
    expect(row.failure_kind).toBeNull();
    expect(row.limit_hits.memory).toBeGreaterThanOrEqual(1);
    if (row.stop_reason === 'answered') {
      // The OOM killer took the python process: the model saw it killed and went on.
      expect(row).toMatchObject({ reward: 1, tool_calls: 1 });
      const chat = policy.requests.filter((r) => r.path.endsWith('/chat/completions'));
      expect(lastToolOutput(chat.at(-1)!.body!)).toMatch(/exit 137|Killed/);
    } else {
      // The OOM killer took OpenCode itself: agent_error, naming the limit.
      expect(row).toMatchObject({ stop_reason: 'agent_error', reward: 0 });
      expect(row.error).toMatch(/the sandbox hit its 1536 MiB memory limit/);
    }
    expect(worker.child.exitCode).toBeNull(); // the worker lives on
    await stopAll();
    expect(leftovers()).toEqual({ sandboxes: [], gateways: [] });
    expect(processesMentioning(tmp)).toEqual([]);
  });

  it('inside the sandbox the model cannot read secrets, reach Redis, the judge or the outside, or write outside; no key leaks anywhere', async () => {
    const e = await setup(policy.url);
    const gold = e.fixture.expected[0].gold;
    const redisPort = new URL(REDIS_URL).port || '6379';
    const judgePort = new URL(f.judge.url).port;
    const py = (label: string, host: string, port: string | number) =>
      `python3 -c "import socket; s=socket.create_connection(('${host}', ${port}), 3); print('${label}-CONNECTED')" 2>&1 | tail -1`;
    const probes = [
      'echo "== pid1 environ"; cat /proc/1/environ 2>&1 | tr "\\0" "\\n"',
      'echo "== env"; env',
      'echo "== home"; ls -la /root /home 2>&1; cat /root/.bashrc 2>&1 | head -3',
      'echo "== redis"; ' + py('REDIS', '127.0.0.1', redisPort),
      'echo "== judge"; ' + py('JUDGE', '127.0.0.1', judgePort),
      'echo "== outside"; ' + py('OUTSIDE', '1.1.1.1', 80) + '; curl -sS -m 3 http://1.1.1.1/ 2>&1 | head -2; echo curl-exit',
      'echo "== writes"; touch /etc/x 2>&1 && echo WROTE-ETC; touch /usr/x 2>&1 && echo WROTE-USR; touch /x 2>&1 && echo WROTE-ROOT; touch /workspace/inside && echo WROTE-WORKSPACE',
      'echo "== processes"; ls /proc | grep -E "^[0-9]+$" | wc -l',
    ].join('; ');
    const script: Script = (body) =>
      toolResults(body) === 0
        ? { kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: probes, description: 'probe the sandbox' } }] }
        : { kind: 'text', text: `Probed. \\boxed{${gold}}` };
    policy.setScript(script);
    const produced = await runCli(['produce', '--run-id', 'ocs', ...e.overrides]);
    expect(produced.code).toBe(0);
    role('sandbox', e);
    role('judge', e);
    role('results', e);
    await waitFor('1 row', () => countLines(e.output) >= 1, 150_000, 250);
    const chat = policy.requests.filter((r) => r.path.endsWith('/chat/completions'));
    const out = lastToolOutput(chat.at(-1)!.body!);
    console.log(`[fault] sandbox probe output:\n${out.slice(0, 3000)}`);
    expect(out).toContain('WROTE-WORKSPACE'); // the probes did run
    for (const bad of ['REDIS-CONNECTED', 'JUDGE-CONNECTED', 'OUTSIDE-CONNECTED', 'WROTE-ETC', 'WROTE-USR', 'WROTE-ROOT', '<html', SENTINEL, FAKE_POLICY_KEY, FAKE_JUDGE_KEY, 'REDIS_URL', 'VCFLEET_LOG_JSON']) {
      expect(out, bad).not.toContain(bad);
    }
    expect(out).toMatch(/Connection refused|Network is unreachable|timed out/);
    // The policy call itself went through the gateway, which added the real key.
    for (const r of chat) expect(r.headers.authorization).toBe(`Bearer ${FAKE_POLICY_KEY}`);
    const rows = readJsonl(e.output);
    expect(rows[0]).toMatchObject({ reward: 1, failure_kind: null, tool_calls: 1 });
    await stopAll();

    // No key anywhere: process output, every Redis key of the prefix, every file of the output folder.
    const files = readTree(path.dirname(e.output));
    expect(files.some((f) => f.file.includes('_transcripts'))).toBe(true);
    const redisDump = await dumpPrefix(REDIS_URL, e.prefix);
    expect(redisDump.keys).toBeGreaterThan(5);
    const places = [
      ...f.procs.map((p, i) => ({ where: `process ${i} output`, text: p.output() })),
      { where: 'redis', text: redisDump.text },
      ...files.map((f) => ({ where: f.file, text: f.text })),
    ];
    for (const { where, text } of places) {
      for (const key of [FAKE_POLICY_KEY, FAKE_JUDGE_KEY]) expect(text.includes(key), `${key} in ${where}`).toBe(false);
    }
    expect(leftovers()).toEqual({ sandboxes: [], gateways: [] });
  });
});
