/**
 * The run's lifecycle with the real OpenCode, as a user meets it in a terminal.
 *
 * Ctrl-C as a user types it: `vcfleet run` in a pseudo-terminal, the real OpenCode in real `local`
 * (bubblewrap) sandboxes, each model running a slow tool when the key is pressed. The terminal sends
 * SIGINT to its whole foreground process group; the sandboxes run in sessions of their own, so only
 * vcfleet hears it. Interrupted once (a clean stop) and then twice at once (stop now), the run then
 * completes with the rows an uninterrupted run gives: no interrupted session became a row, and no
 * attempt was spent.
 *
 * A policy URL where nothing listens, with the preflight skipped: the run pauses once its first
 * rollouts failed on it, says which URL, and exits 4; with the server up, the same command finishes.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/all-in-one/private-redis.ts';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { scripts, startScriptedPolicyServer, toolResults, userText, type ScriptedPolicyServer } from '../helpers/scripted-policy-server.ts';
import { FAKE_POLICY_KEY, startCliInTerminal, waitFor, type FleetEnv, type TerminalCliProcess } from '../helpers/fleet.ts';
import { createTmpDir } from '../helpers/tmp.ts';
import { faultFleet } from './fault-fleet.ts';
import { countLines, descendants, processesMentioning, readJsonl } from './fault-helpers.ts';
import type { Row } from '../../src/shared/records/rows.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const hasScript = (() => {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!hasScript)('vcfleet run with the real OpenCode: Ctrl-C, a dead policy server', () => {
  const f = faultFleet();
  let policy: ScriptedPolicyServer;
  beforeAll(async () => {
    policy = await startScriptedPolicyServer();
  });
  afterAll(async () => {
    await policy.close();
  });

  /** Each model first runs `sleep 20` (long enough to be interrupted), then answers: puzzle 1 right, puzzle 2 wrong. */
  function scriptPolicy(e: FleetEnv): void {
    const [one, two] = e.fixture.expected;
    policy.setScript((body) => {
      if (toolResults(body) === 0) return { kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: 'sleep 20 && echo measured', description: 'measure' } }] };
      const text = userText(body);
      const answer = text.includes(two.question) ? `not ${two.gold}` : one.gold;
      return { kind: 'text', text: `Measured. \\boxed{${answer}}` };
    });
  }

  /** Start `vcfleet run` in a terminal and wait until both models run their tool in their sandboxes. */
  async function startMidTool(args: string[], tmp: string): Promise<TerminalCliProcess> {
    const p = startCliInTerminal(args, { TMPDIR: tmp, POLICY_API_KEY: FAKE_POLICY_KEY });
    f.procs.push(p);
    await waitFor('both models running their tool', () => descendants(p.child.pid!).filter((d) => d.cmd.startsWith('sleep 20')).length === 2, 150_000, 100);
    return p;
  }

  /** Both rollouts are back in the run's queue, neither attempt spent nor counted as a stall, and no row exists. */
  async function expectHandedBack(e: FleetEnv, runId: string): Promise<void> {
    const queue = openQueue('rollout', f.redis, e.prefix, { scope: runId });
    try {
      const jobs = await queue.getJobs(['wait', 'delayed', 'prioritized', 'active', 'failed', 'completed']);
      const states = await Promise.all(jobs.map((j) => j.getState()));
      expect(states.sort()).toEqual(['delayed', 'delayed']);
      for (const job of jobs) expect({ attemptsMade: job.attemptsMade, stalledCounter: job.stalledCounter }).toEqual({ attemptsMade: 0, stalledCounter: 0 });
    } finally {
      await queue.close();
    }
    expect(countLines(e.output)).toBe(0);
  }

  const outcome = (rows: Row[]) =>
    rows.map((r) => ({ task: r.task_id, reward: r.reward, stop: r.stop_reason, failure: r.failure_kind, answer: r.extracted_answer, tools: r.tool_calls })).sort((a, b) => a.task.localeCompare(b.task));

  it('once (a clean stop), then twice at once (stop now), mid-tool: attempts kept, no row from an interrupted session, final rows equal an uninterrupted run\'s', async () => {
    const tmp = createTmpDir('vcfleet-ctrlc-');
    const e = await f.env({
      rows: 2,
      overrides: ['++agent.kind=opencode', `++policy_base_url=${policy.url}`, '++policy_model_name=scripted-vlm', '++queues.rollout_concurrency=2',
        '++policy.context_window=64000', '++policy.max_output_tokens=2048', '++task_timeout_s=150'],
    });
    scriptPolicy(e);
    const args = ['run', '--run-id', 'cc', ...e.overrides];

    const first = await startMidTool(args, tmp);
    first.ctrlC();
    expect(await first.exited, first.output()).toBe(4);
    expect(first.output()).toContain('SIGINT: stopping; running rollouts go back to the queue with their attempts kept; resume with: node bin/vcfleet.js run --run-id cc');
    expect(first.output()).not.toMatch(/"level":50|OpenCode failed|agent_error/);
    await expectHandedBack(e, 'cc');
    expect(processesMentioning(tmp)).toEqual([]);

    const second = await startMidTool(args, tmp);
    second.ctrlC();
    await sleep(150);
    second.ctrlC();
    expect(await second.exited, second.output()).toBe(130);
    expect(second.output()).toMatch(/second SIGINT: exiting now; \d running jobs handed back to the queue, attempts kept/);
    await expectHandedBack(e, 'cc');
    // The sandboxes died with vcfleet (bwrap --die-with-parent); their folders wait for the next worker's reaper.
    await waitFor('the sandboxes to die', () => processesMentioning(tmp).length === 0, 10_000, 100);

    const third = startCliInTerminal(args, { TMPDIR: tmp, POLICY_API_KEY: FAKE_POLICY_KEY });
    f.procs.push(third);
    expect(await third.exited, third.output()).toBe(0);
    expect(third.output()).toContain('complete: all 2 rollouts scored'); // one of them wrong: scored 0, not masked
    const resumed = readJsonl(e.output);

    const baselineOutput = path.join(path.dirname(e.output), 'baseline.jsonl');
    const baseline = startCliInTerminal(['run', '--run-id', 'base', ...e.overrides, `++output_jsonl_fpath=${baselineOutput}`], { TMPDIR: tmp, POLICY_API_KEY: FAKE_POLICY_KEY });
    f.procs.push(baseline);
    expect(await baseline.exited, baseline.output()).toBe(0);
    expect(outcome(resumed)).toEqual(outcome(readJsonl(baselineOutput)));
    expect(outcome(resumed).map((r) => r.reward)).toEqual([1, 0]);
    expect(processesMentioning(tmp)).toEqual([]);
  });

  it('a policy URL where nothing listens (preflight skipped): paused after the first rollouts fail on it, exit 4 naming the URL; with the server up, the same command finishes', async () => {
    const tmp = createTmpDir('vcfleet-ff-');
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/v1`;
    const e = await f.env({
      rows: 3,
      overrides: ['++agent.kind=opencode', `++policy_base_url=${url}`, '++policy_model_name=scripted-vlm', '++queues.rollout_concurrency=2',
        '++queues.fail_fast_after=2', '++queues.rollout_backoff_ms=1000', '++policy.context_window=64000', '++policy.max_output_tokens=2048', '++task_timeout_s=150'],
    });
    const args = ['run', '--run-id', 'ff', '--skip-preflight', ...e.overrides];
    const down = startCliInTerminal(args, { TMPDIR: tmp, POLICY_API_KEY: FAKE_POLICY_KEY });
    f.procs.push(down);
    expect(await down.exited, down.output()).toBe(4);
    const out = down.output().replace(/\r/g, '');
    expect(out).toMatch(new RegExp(`paused: .*policy server failed \\d+ calls in a row .*connection_refused.*policy server ${url.replace(/\./g, '\\.')}\\. Fix it, then resume with \`node bin/vcfleet\\.js run --run-id ff( \\+\\+\\S+)*\``));
    expect(countLines(e.output)).toBe(0); // no task was burnt as a row
    const queue = openQueue('rollout', f.redis, e.prefix, { scope: 'ff' });
    expect(await queue.isPaused()).toBe(true);
    await queue.close();

    const up = await startScriptedPolicyServer({ port, script: scripts.answer('\\boxed{A}') });
    try {
      const resumed = startCliInTerminal(args, { TMPDIR: tmp, POLICY_API_KEY: FAKE_POLICY_KEY });
      f.procs.push(resumed);
      expect(await resumed.exited, resumed.output()).not.toBe(4);
      const rows = readJsonl(e.output);
      expect(rows.map((r) => r.stop_reason)).toEqual(['answered', 'answered', 'answered']);
    } finally {
      await up.close();
    }
  });
});
