/**
 * When a `vcfleet worker` process ends on its own or drains, as a pod of the Helm chart does:
 * `--max-jobs` (a KEDA ScaledJob's one pod per rollout) exits after its jobs with the rest still
 * queued; `--idle-exit` exits with nothing to do; `bin/vcfleet-drain.js` (the chart's preStop)
 * lets the running rollout finish before the worker exits, where SIGTERM hands it back.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Queue } from 'bullmq';
import { produceRun } from '../../src/producer/produce.ts';
import { loadOrPrepare } from '../../src/prepare/load-or-prepare.ts';
import { createRedis } from '../../src/shared/redis/connect.ts';
import { bullQueueName } from '../../src/shared/queue/registry.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { makeFleetEnv, REDIS_URL, startCli, waitFor, type CliProcess, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

const judge = useScriptedJudge();
const envs: FleetEnv[] = [];
const procs: CliProcess[] = [];
const queues: Queue[] = [];

afterAll(async () => {
  for (const p of procs) {
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await p.exited;
  }
  await Promise.all(queues.map((q) => q.close()));
  for (const e of envs) await e.cleanup();
  removeTmpDirs();
});

/** A fleet env with `rows` rollouts produced, and its rollout queue to count. */
async function producedRun(rows: number, delayMs: number): Promise<{ env: FleetEnv; rollouts: Queue }> {
  const env = await makeFleetEnv({ rows, judgeUrl: judge.url, script: { '*': { answer: '@gold', delay_ms: delayMs } }, overrides: ['++queues.rollout_concurrency=1', '++run_id=life'] });
  envs.push(env);
  const client = createRedis(REDIS_URL, 'client');
  const bench = await loadOrPrepare(env.config(), env.logger);
  await produceRun({ config: env.config(), redis: client, logger: env.logger, tasks: bench.tasks, readImage: bench.readImage });
  client.disconnect();
  const rollouts = new Queue(bullQueueName('rollout'), { connection: { url: REDIS_URL }, prefix: env.prefix });
  queues.push(rollouts);
  return { env, rollouts };
}

function worker(env: FleetEnv, role: string, ...args: string[]): CliProcess {
  const p = startCli(['worker', role, ...args, ...env.overrides]);
  procs.push(p);
  return p;
}

describe('vcfleet worker --max-jobs / --idle-exit', () => {
  it('--max-jobs 2 exits by itself after two rollouts; the other two stay queued, none lost', async () => {
    const { env, rollouts } = await producedRun(4, 100);
    const p = worker(env, 'sandbox', '--max-jobs', '2');
    expect(await p.exited, p.output()).toBe(0);
    expect(p.output()).toContain('--max-jobs 2');
    const counts = await rollouts.getJobCounts('completed', 'waiting', 'delayed', 'prioritized', 'active', 'failed');
    expect(counts.completed).toBe(2);
    expect(counts.waiting + counts.delayed + counts.prioritized).toBe(2);
    expect(counts.active + counts.failed).toBe(0);
  });

  it('--idle-exit exits a worker that has nothing to do', async () => {
    const env = await makeFleetEnv({ rows: 1, judgeUrl: judge.url });
    envs.push(env);
    const p = worker(env, 'judge', '--idle-exit', '1');
    expect(await p.exited, p.output()).toBe(0);
    expect(p.output()).toContain('no job for 1 s (--idle-exit)');
  });

  it('refuses a --max-jobs that is not a whole number ≥ 1, naming it', async () => {
    const env = await makeFleetEnv({ rows: 1, judgeUrl: judge.url });
    envs.push(env);
    const p = worker(env, 'sandbox', '--max-jobs', '0');
    expect(await p.exited).not.toBe(0);
    expect(p.output()).toContain('--max-jobs must be a whole number of at least 1, not "0"');
  });
});

describe('draining a worker (bin/vcfleet-drain.js, the chart\'s preStop)', () => {
  /** A sandbox worker on a run of 2 rollouts longer than its stop grace (5 s), once it runs the first. */
  async function busyWorker(): Promise<{ p: CliProcess; rollouts: Queue }> {
    const { env, rollouts } = await producedRun(2, 9000);
    const p = worker(env, 'sandbox');
    await waitFor('a rollout running', async () => ((await rollouts.getJobCounts('active')).active === 1 ? true : undefined), 60_000, 100);
    return { p, rollouts };
  }

  it('lets the running rollout finish, takes no other, and returns once the worker exited', async () => {
    const { p, rollouts } = await busyWorker();
    // Asynchronously: this process must go on reading the worker's output and reaping it.
    const drain = await promisify(execFile)(process.execPath, ['bin/vcfleet-drain.js', '--pid', String(p.child.pid), '--timeout', '60']);
    expect(drain.stdout).toContain('drained; the worker exited');
    expect(p.child.exitCode ?? (await p.exited)).toBe(0);
    const counts = await rollouts.getJobCounts('completed', 'waiting', 'delayed', 'active');
    expect(counts).toEqual({ completed: 1, waiting: 1, delayed: 0, active: 0 });
  });

  it('SIGTERM instead hands the running rollout back unfinished (what the drain avoids)', async () => {
    const { p, rollouts } = await busyWorker();
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
    const counts = await rollouts.getJobCounts('completed', 'waiting', 'delayed', 'active');
    expect(counts.completed).toBe(0);
    expect(counts.waiting + counts.delayed).toBe(2);
  });
});
