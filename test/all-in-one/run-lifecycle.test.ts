/**
 * `vcfleet run` as a user meets it, each as its own process on the session's Redis: preflight
 * failures stop it in seconds with one line each and nothing enqueued; exit codes say whether every
 * rollout was scored; a run keeps to its own jobs on a shared prefix; a stopped run resumes from
 * Redis alone; `status` and `retry` say what is still pending and who will take it.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DemoRunToResume, runAll } from '../../src/all-in-one/run-all.ts';
import { freePort } from '../../src/all-in-one/private-redis.ts';
import { produceRun } from '../../src/producer/produce.ts';
import { loadPreparedBenchmark } from '../../src/prepare/load-prepared.ts';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { RunStore } from '../../src/shared/stores/run-store.ts';
import { createScriptedAgent } from '../../src/agent/scripted-agent.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { startScriptedPolicyServer, type ScriptedPolicyServer } from '../helpers/scripted-policy-server.ts';
import { CLI, locatingOf, makeFleetEnv, REDIS_URL, runCli, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

const quiet = { update() {}, stop() {} };

describe('vcfleet run: preflight, exit codes, its own run only, resume', () => {
  const judge = useScriptedJudge();
  let policy: ScriptedPolicyServer;
  let env: FleetEnv;
  let redis: Redis;
  beforeAll(async () => {
    policy = await startScriptedPolicyServer({ modelName: 'served-vlm' });
    redis = createRedis(REDIS_URL, 'client');
  });
  afterAll(async () => {
    await policy.close();
    redis.disconnect();
  });
  afterEach(async () => {
    judge.setScript([]);
    await env?.cleanup();
    removeTmpDirs();
  });

  const runs = async () => new RunStore(redis, env.prefix).listRuns();

  it('preflight: a dead policy URL, a model it does not serve, a judge without its key, a Redis that keeps nothing: exit 2, one line each, nothing enqueued', async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url });
    const opencode = ['++agent.kind=opencode', `++policy_model_name=served-vlm`];
    const closed = await freePort();
    const dead = await runCli(['run', '--run-id', 'pf1', ...env.overrides, ...opencode, `++policy_base_url=http://127.0.0.1:${closed}/v1`]);
    expect(dead.code, dead.output).toBe(2);
    expect(dead.output).toContain('preflight failed, nothing was enqueued');
    expect(dead.output).toMatch(new RegExp(`policy server http://127\\.0\\.0\\.1:${closed}/v1: unreachable \\(ECONNREFUSED\\); start it, or set POLICY_BASE_URL`));
    const wrongModel = await runCli(['run', '--run-id', 'pf2', ...env.overrides, '++agent.kind=opencode', '++policy_model_name=other-vlm', `++policy_base_url=${policy.url}`]);
    expect(wrongModel.code).toBe(2);
    expect(wrongModel.output).toContain('does not serve model "other-vlm" (it lists served-vlm); set POLICY_MODEL');
    const noKey = await runCli(['run', '--run-id', 'pf3', ...env.overrides, '++judge.api_key=null', '++visual_coding_opencode_judge_base_url=https://api.openai.com/v1']);
    expect(noKey.code).toBe(2);
    expect(noKey.output).toMatch(/no judge API key is set: set OPENAI_API_KEY/);
    const volatile = await runCli(['run', '--run-id', 'pf4', ...env.overrides, '++preflight.require_redis_persistence=true']);
    expect(volatile.code).toBe(2);
    expect(volatile.output).toContain('Redis persists nothing');
    // Token capture against a server that returns no token ids or log-probabilities (not vLLM).
    const noTokens = await runCli(['run', '--run-id', 'pf5', ...env.overrides, ...opencode, `++policy_base_url=${policy.url}`, '++policy.token_capture=true']);
    expect(noTokens.code, noTokens.output).toBe(2);
    expect(noTokens.output).toContain(`policy server ${policy.url}/chat/completions: a one-token call came back without prompt_token_ids, token_ids, logprobs; policy.token_capture needs`);
    expect(await runs()).toEqual([]);
  });

  it('exit code 0 when every rollout is scored, 3 when some are masked, with a line that says which', async () => {
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url, overrides: ['++judge.max_retries=0', '++queues.judge_attempts=1', '++judge.cache=false'] });
    const ok = await runCli(['run', '--run-id', 'ex0', ...env.overrides]);
    expect(ok.code, ok.output).toBe(0);
    expect(ok.stdout).toContain('complete: all 3 rollouts scored');
    judge.setScript(() => ({ status: 500 }));
    const masked = await runCli(['run', '--run-id', 'ex3', ...env.overrides, '++output_jsonl_fpath=' + env.output.replace('.jsonl', '-3.jsonl')]);
    expect(masked.code, masked.output).toBe(3);
    // The advice repeats where the run lives (its Redis, prefix and folders were given as ++settings).
    expect(masked.stdout).toContain(`\`${CLI} rejudge --run-id ex3 ${locatingOf(env.overrides)} ++output_jsonl_fpath=${env.output.replace('.jsonl', '-3.jsonl')}\``);
  });

  it('keeps to its own run on a shared prefix: another run\'s jobs are neither taken nor waited for', async () => {
    env = await makeFleetEnv({ rows: 4, judgeUrl: judge.url });
    const config = env.config(['++run_id=other']);
    const bench = await loadPreparedBenchmark(config.data_dir, config.benchmark);
    await produceRun({ config, redis, logger: env.logger, tasks: bench.tasks, readImage: bench.readImage });
    const fleetQueue = openQueue('rollout', redis, env.prefix);
    expect(await fleetQueue.getWaitingCount()).toBe(4);
    const mine = await runAll({ config: env.config(['++run_id=mine', `++output_jsonl_fpath=${env.output.replace('.jsonl', '-mine.jsonl')}`]), logger: env.logger, agent: createScriptedAgent({ '*': { answer: '@gold' } }), progress: quiet });
    expect(mine).toMatchObject({ status: 'complete', done: 4, total: 4, masked: 0 });
    expect(await fleetQueue.getWaitingCount()).toBe(4); // the other run's jobs were left alone
    expect((await new RunStore(redis, env.prefix).requireRun('mine')).queue_scope).toBe('mine');
    await fleetQueue.close();
  });

  it('resumes a stopped run from Redis alone (no benchmark on disk), and a demo run only as a demo', async () => {
    env = await makeFleetEnv({ rows: 4, judgeUrl: judge.url, overrides: ['++queues.rollout_concurrency=1'] });
    const stop = new AbortController();
    const slow = createScriptedAgent({ '*': { answer: '@gold', delay_ms: 300 } });
    let rows = 0;
    const first = await runAll({
      config: env.config(['++run_id=rs']), logger: env.logger, agent: slow, signal: stop.signal,
      progress: { update: (c) => void ((rows = c.num_rollouts) >= 1 && stop.abort()), stop() {} },
    });
    expect(first.status).toBe('stopped');
    expect(rows).toBeGreaterThanOrEqual(1);
    const resumed = await runAll({
      config: env.config(['++run_id=rs', '++data_dir=/nonexistent/nothing-prepared', '++babyvision_parquet=null']), logger: env.logger,
      agent: createScriptedAgent({ '*': { answer: '@gold' } }), progress: quiet,
    });
    expect(resumed).toMatchObject({ status: 'complete', done: 4, masked: 0 });
    const config = env.config(['++run_id=dm']);
    const bench = await loadPreparedBenchmark(config.data_dir, config.benchmark);
    await produceRun({ config, redis, logger: env.logger, tasks: bench.tasks, readImage: bench.readImage, ownQueues: true, origin: 'demo' });
    const err = await runAll({ config, logger: env.logger, agent: slow, progress: quiet }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DemoRunToResume);
    expect((err as Error).message).toContain('vcfleet demo --run-id dm');
  });

  it('status counts jobs still waiting; status and retry say that no worker serves them, and how to start one', async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url });
    expect((await runCli(['produce', '--run-id', 'st', ...env.overrides])).code).toBe(0);
    const status = await runCli(['status', '--run-id', 'st', ...env.overrides]);
    expect(status.stdout).toMatch(/rows 0\/2; 2 job\(s\) still waiting or running/);
    expect(status.stdout).toContain('workers: none running');
    const retry = await runCli(['retry', '--run-id', 'st', ...env.overrides]);
    const where = locatingOf(env.overrides);
    expect(retry.stdout).toContain(`requeued 0 failed job(s) of run st (none); 2 job(s) of this run queued; no worker serves sandbox, judge, results of this run: start one (${CLI} worker sandbox|judge|results ${where}, or ${CLI} run --run-id st ${where})`);
    expect(status.stdout).toContain(`2 job(s) queued; no worker serves sandbox, judge, results of this run: start one (${CLI} worker sandbox|judge|results ${where}, or ${CLI} run --run-id st ${where})`);
  });
});
