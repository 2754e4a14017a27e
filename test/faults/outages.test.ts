/**
 * Outages of what the fleet depends on, and jobs that can never succeed, in one process (`runAll`)
 * on the session's Redis: the judge answering 500 and 429 for a while, the judge down for longer
 * than its retries (masked, then `vcfleet rejudge`), a sandbox provider that cannot create sandboxes
 * (masked infra_failed, then `vcfleet retry`), and a poison job added straight to the rollout queue.
 */
import { describe, expect, it } from 'vitest';
import { runAll } from '../../src/all-in-one/run-all.ts';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { createOpenCodeRunner } from '../../src/agent/opencode-runner.ts';
import { LocalBwrapProvider } from '../../src/sandboxes/local/provider.ts';
import { createScriptedAgent } from '../../src/agent/scripted-agent.ts';
import { runCli } from '../helpers/fleet.ts';
import { createTmpDir } from '../helpers/tmp.ts';
import { expectedRewards, expectOneRowEach, expectRewards, readJsonl } from './fault-helpers.ts';
import { readdirSync, readFileSync } from 'node:fs';
import { metricsPathFor } from '../../src/shared/output/metrics.ts';
import path from 'node:path';
import { faultFleet } from './fault-fleet.ts';

const quiet = { update() {}, stop() {} };

describe('judge and sandbox-provider outages, poison jobs', () => {
  const f = faultFleet();

  const script = { '*': { answer: '@gold' }, 'bv-002': { answer: 'Q' }, 'bv-004': { answer: null, text: '' } };

  it('judge answering 500 and 429 (Retry-After) for 2.5 s: retried, every row scored, none masked', async () => {
    const env = await f.env({ rows: 6, script, overrides: ['++judge.max_retries=4', '++judge.backoff_base_ms=400', '++judge.backoff_max_ms=2000'] });
    let outageUntil = 0;
    let failures = 0;
    f.judge.setScript((_req, i) => {
      if (outageUntil === 0) outageUntil = Date.now() + 2500;
      if (Date.now() >= outageUntil) return 'grade';
      failures++;
      return i % 2 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 500 };
    });
    const result = await runAll({ config: env.config(['++run_id=j5']), logger: env.logger, agent: createScriptedAgent(script), progress: quiet });
    expect(result.status).toBe('complete');
    const rows = readJsonl(env.output);
    expectOneRowEach(rows, 'j5', env.fixture);
    expectRewards(rows, expectedRewards(env.fixture, script));
    expect(rows.filter((r) => r.failure_kind !== null)).toEqual([]);
    expect(failures).toBeGreaterThanOrEqual(3);
    console.log(`[fault] judge 500/429 for 2.5 s: ${failures} failed calls retried, 6/6 scored`);
  });

  it('judge down for longer than its retries: rows masked judge_failed, then `vcfleet rejudge` scores them', async () => {
    const env = await f.env({ rows: 6, script, overrides: ['++queues.judge_attempts=1'] });
    f.judge.setScript(() => ({ status: 503 }));
    const first = await runAll({ config: env.config(['++run_id=jd']), logger: env.logger, agent: createScriptedAgent(script), progress: quiet });
    expect(first.status).toBe('complete');
    const masked = readJsonl(env.output);
    expectOneRowEach(masked, 'jd', env.fixture);
    // Answered rollouts are masked (not scored 0); the unanswered one needs no judge.
    expect(masked.filter((r) => r.failure_kind === 'judge_failed').length).toBe(5);
    expect(first.metrics?.num_masked).toBe(5);
    f.judge.setScript([]);
    // No worker serves the run's queues now: `rejudge` grades them itself, as `vcfleet run` would.
    const sent = await runCli(['rejudge', '--run-id', 'jd', ...env.overrides]);
    expect(sent.code, sent.output).toBe(0);
    expect(sent.stdout).toContain('sent 5 judge_failed row(s) of run jd back to the judge; no worker serves judge, results: doing it in this process');
    expect(sent.stdout).toContain('complete: all 6 rollouts scored');
    const rows = readJsonl(env.output);
    expectOneRowEach(rows, 'jd', env.fixture);
    expectRewards(rows, expectedRewards(env.fixture, script));
    expect(JSON.parse(readFileSync(metricsPathFor(env.output), 'utf8')).num_masked).toBe(0);
  });

  it('sandbox provider cannot create (bwrap missing): infra_failed rows, then `vcfleet retry` completes them', async () => {
    const env = await f.env({ rows: 4, script });
    const sandboxRoot = createTmpDir('vcfleet-sbx-');
    const config = env.config(['++run_id=px']);
    const broken = createOpenCodeRunner({
      config, logger: env.logger,
      provider: new LocalBwrapProvider({ rootDir: sandboxRoot, workdir: '/workspace', bwrapPath: path.join(sandboxRoot, 'no-such-bwrap') }),
      socketDir: path.join(sandboxRoot, 'sockets'),
    });
    const first = await runAll({ config, logger: env.logger, agent: broken, progress: quiet });
    expect(first.status).toBe('complete');
    const masked = readJsonl(env.output);
    expectOneRowEach(masked, 'px', env.fixture);
    for (const row of masked) {
      expect(row).toMatchObject({ failure_kind: 'infra_failed', reward: null });
      expect(row.error).toContain(`bubblewrap is not installed (no ${path.join(sandboxRoot, 'no-such-bwrap')}): the local sandboxes need it; install it with \`apt-get install bubblewrap\``);
    }
    // Nothing was left behind by the failed creations: no sandbox folder, no gateway socket folder.
    expect(readdirSync(sandboxRoot).filter((n) => n !== 'sockets')).toEqual([]);
    expect(readdirSync(path.join(sandboxRoot, 'sockets'))).toEqual([]);
    // The provider is fixed (here: the configured scripted agent stands in for a working sandbox);
    // `retry` runs the rollouts again itself, since no worker serves the run's queues.
    const retried = await runCli(['retry', '--run-id', 'px', ...env.overrides]);
    expect(retried.code, retried.output).toBe(0);
    expect(retried.stdout).toContain('requeued 4 failed job(s) of run px (4 rollout); no worker serves sandbox, judge, results: doing it in this process');
    expect(retried.stdout).toContain('complete: all 4 rollouts scored');
    const rows = readJsonl(env.output);
    expectOneRowEach(rows, 'px', env.fixture);
    expectRewards(rows, expectedRewards(env.fixture, script));
  });

  it('poison jobs added straight to the rollout queue fail once, unrecoverable; the run completes', async () => {
    const env = await f.env({ rows: 5, script });
    // The run's own rollout queue (vcfleet run gives run pz the queues of scope pz).
    const q = openQueue('rollout', f.redis, env.prefix, { scope: 'pz' });
    await q.add('rollout', { v: 1, run_id: 'pz', task_id: 42, junk: '\u0000' } as never, { jobId: 'poison-malformed', attempts: 3 });
    await q.add('rollout', { v: 1, run_id: 'pz', task_id: 'no-such-task', repeat: 0, rollout_id: 'pz-no-such-task-0' }, { jobId: 'poison-unknown-task', attempts: 3 });
    const result = await runAll({ config: env.config(['++run_id=pz']), logger: env.logger, agent: createScriptedAgent(script), progress: quiet });
    expect(result.status).toBe('complete');
    const rows = readJsonl(env.output);
    expectOneRowEach(rows, 'pz', env.fixture);
    expectRewards(rows, expectedRewards(env.fixture, script));
    for (const id of ['poison-malformed', 'poison-unknown-task']) {
      const job = await q.getJob(id);
      expect(await job!.getState()).toBe('failed');
      expect(job!.attemptsMade).toBe(1);
    }
    expect((await q.getJob('poison-malformed'))!.failedReason).toMatch(/malformed rollout job data: task_id/);
    expect((await q.getJob('poison-unknown-task'))!.failedReason).toMatch(/task no-such-task is not part of run pz/);
    await q.close();
  });
});
