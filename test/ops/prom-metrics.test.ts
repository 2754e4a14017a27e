/**
 * Prometheus metrics: the hooks on their own (fresh registry per instance, gauges and counters),
 * `/metrics` of `vcfleet worker` processes scraped while a run goes through them (counters climb
 * to the number of rollouts, judge verdicts, committed rows, queue depths), and `runAll`'s hooks.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { register as globalRegistry } from 'prom-client';
import { createFleetMetrics } from '../../src/ops/prom-metrics.ts';
import { listenMetrics } from '../../src/ops/metrics-server.ts';
import { produceRun } from '../../src/producer/produce.ts';
import { loadOrPrepare } from '../../src/prepare/load-or-prepare.ts';
import { runAll } from '../../src/all-in-one/run-all.ts';
import { freePort } from '../../src/all-in-one/private-redis.ts';
import type { AgentRunner } from '../../src/shared/ports/agent.ts';
import type { Judge } from '../../src/shared/ports/judge.ts';
import { createRedis } from '../../src/shared/redis/connect.ts';
import { createScriptedAgent } from '../../src/agent/scripted-agent.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { makeFleetEnv, REDIS_URL, startCli, waitFor, type CliProcess, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { rolloutOutcome } from '../../src/shared/records/rollout-outcome.ts';

/** The value of one series in Prometheus text format (labels given must match; others are ignored). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z_:][\w:]*)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

async function scrape(port: number): Promise<string> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    return res.ok ? await res.text() : '';
  } catch {
    return '';
  }
}

describe('fleet metrics hooks', () => {
  it('counts jobs, running rollouts, stop reasons and judge verdicts in a registry of its own', async () => {
    const a = createFleetMetrics({ role: 'sandbox' });
    const b = createFleetMetrics();
    a.jobEnd('rollout')('completed', 1500);
    a.jobEnd('rollout')('failed', 20);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const inner: AgentRunner = {
      host: { usesHostMemory: true, maxLifetimeS: null },
      async run(req) {
        await gate;
        if (req.attempt === 2) throw new Error('sandbox down');
        return { outcome: rolloutOutcome({ stop_reason: 'answered', extracted_answer: 'A', turns: 1, limit_hits: { memory: 2 }, refused_requests: { path: 1 } }), transcript: null };
      },
      async close() {},
    };
    const agent = a.wrapAgent(inner);
    const running = [agent.run({ attempt: 1 } as never, new AbortController().signal), agent.run({ attempt: 2 } as never, new AbortController().signal).catch(() => null)];
    const during = await a.registry.metrics();
    expect(sample(during, 'vcfleet_active_sandboxes', { role: 'sandbox' })).toBe(2);
    release();
    await Promise.all(running);
    const outcomes = [{ status: 'scored', verdict: 'equivalent', reason: '', reward: 1, cached: false }, { status: 'failed', reason: 'no verdict' }] as const;
    let i = 0;
    const judge = a.wrapJudge({ modelName: 'm', grade: async () => outcomes[i++], close: async () => {} } as Judge);
    expect(judge.modelName).toBe('m');
    await judge.grade({} as never);
    await judge.grade({} as never);
    const text = await a.registry.metrics();
    expect(sample(text, 'vcfleet_jobs_total', { queue: 'rollout', outcome: 'completed' })).toBe(1);
    expect(sample(text, 'vcfleet_jobs_total', { queue: 'rollout', outcome: 'failed' })).toBe(1);
    expect(sample(text, 'vcfleet_stage_duration_seconds_sum', { queue: 'rollout', outcome: 'completed' })).toBeCloseTo(1.5);
    expect(sample(text, 'vcfleet_active_sandboxes')).toBe(0);
    expect(sample(text, 'vcfleet_rollouts_total', { result: 'answered' })).toBe(1);
    expect(sample(text, 'vcfleet_rollouts_total', { result: 'infra_error' })).toBe(1);
    expect(sample(text, 'vcfleet_sandbox_limit_hits_total', { limit: 'memory' })).toBe(2);
    expect(sample(text, 'vcfleet_gateway_refusals_total', { reason: 'path' })).toBe(1);
    expect(sample(text, 'vcfleet_judge_calls_total', { outcome: 'scored', verdict: 'equivalent', cached: 'false' })).toBe(1);
    expect(sample(text, 'vcfleet_judge_calls_total', { outcome: 'failed' })).toBe(1);
    // Nothing leaks into another instance or prom-client's global registry.
    expect(sample(await b.registry.metrics(), 'vcfleet_jobs_total')).toBeUndefined();
    expect(await globalRegistry.metrics()).not.toContain('vcfleet_');
    await a.close();
    await b.close();
  });

  it('reports a sandbox-worker\'s slots and its holds for lack of memory', async () => {
    const m = createFleetMetrics({ role: 'sandbox' });
    m.admission({ slots: 6, held: null, holds: 0 });
    m.admission({ slots: 6, held: 'no memory', holds: 1 });
    let text = await m.registry.metrics();
    expect(text).toContain('vcfleet_sandbox_slots{role="sandbox"} 6');
    expect(text).toContain('vcfleet_sandbox_admission_held{role="sandbox"} 1');
    expect(text).toContain('vcfleet_sandbox_admission_holds_total{role="sandbox"} 1');
    m.admission({ slots: 6, held: null, holds: 1 });
    text = await m.registry.metrics();
    expect(text).toContain('vcfleet_sandbox_admission_held{role="sandbox"} 0');
    expect(text).toContain('vcfleet_sandbox_admission_holds_total{role="sandbox"} 1');
  });

  it('serves /metrics and nothing else', async () => {
    const m = createFleetMetrics();
    const server = await listenMetrics(m.registry, '127.0.0.1', 0);
    const ok = await fetch(server.url);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toContain('text/plain');
    expect(await ok.text()).toContain('# TYPE vcfleet_jobs_total counter');
    expect((await fetch(server.url.replace('/metrics', '/'))).status).toBe(404);
    await server.close();
    await server.close();
  });
});

describe('/metrics of running fleet processes', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  const envs: FleetEnv[] = [];
  const procs: CliProcess[] = [];
  afterAll(async () => {
    for (const p of procs) if (p.child.exitCode === null) {
      p.child.kill('SIGTERM');
      await p.exited;
    }
    for (const e of envs) await e.cleanup();
    removeTmpDirs();
  });

  it('reflects the jobs processed while a run goes through `vcfleet worker` processes', async () => {
    envs.push((env = await makeFleetEnv({ rows: 6, judgeUrl: judge.url, script: { '*': { answer: '@gold', delay_ms: 300 } }, overrides: ['++queues.rollout_concurrency=1', '++run_id=prom'] })));
    const config = env.config();
    const client = createRedis(REDIS_URL, 'client');
    const bench = await loadOrPrepare(config, env.logger);
    await produceRun({ config, redis: client, logger: env.logger, tasks: bench.tasks, readImage: bench.readImage });
    client.disconnect();
    const [sandboxPort, judgePort, resultsPort] = [await freePort(), await freePort(), await freePort()];
    const role = (r: string, port: number) => startCli(['worker', r, ...env.overrides, `++metrics_server.port=${port}`]);
    procs.push(role('results', resultsPort), role('judge', judgePort), role('sandbox', sandboxPort));

    const seen: number[] = [];
    let maxActive = 0;
    await waitFor('6 rollouts counted on the sandbox-worker', async () => {
      const text = await scrape(sandboxPort);
      const done = sample(text, 'vcfleet_jobs_total', { queue: 'rollout', outcome: 'completed' }) ?? 0;
      maxActive = Math.max(maxActive, sample(text, 'vcfleet_active_sandboxes') ?? 0);
      if (text) seen.push(done);
      return done === 6 || undefined;
    }, 60_000, 100);
    // Scraped during the run: the counter climbed through intermediate values to the rollouts.
    expect(seen.some((n) => n > 0 && n < 6)).toBe(true);
    expect(maxActive).toBe(1);
    const sandboxText = await scrape(sandboxPort);
    expect(sample(sandboxText, 'vcfleet_stage_duration_seconds_count', { role: 'sandbox', queue: 'rollout', outcome: 'completed' })).toBe(6);
    expect(sample(sandboxText, 'vcfleet_rollouts_total', { result: 'answered' })).toBe(6);

    const judgeText = await waitFor('6 verdicts on the judge-worker', async () => {
      const text = await scrape(judgePort);
      return sample(text, 'vcfleet_jobs_total', { queue: 'judge', outcome: 'completed' }) === 6 ? text : undefined;
    }, 30_000);
    expect(sample(judgeText, 'vcfleet_judge_calls_total', { role: 'judge', outcome: 'scored', verdict: 'equivalent' })).toBe(6);
    const resultsText = await waitFor('6 rows on the results consumer', async () => {
      const text = await scrape(resultsPort);
      return sample(text, 'vcfleet_rows_committed_total', { result: 'new', kind: 'scored' }) === 6 ? text : undefined;
    }, 30_000);
    expect(sample(resultsText, 'vcfleet_jobs_total', { queue: 'results', outcome: 'completed' })).toBe(6);
    // Queue depths are read from Redis on scrape, the same from every process.
    expect(sample(resultsText, 'vcfleet_queue_jobs', { queue: 'rollout', state: 'completed' })).toBe(6);
    expect(sample(resultsText, 'vcfleet_queue_jobs', { queue: 'rollout', state: 'waiting' })).toBe(0);
  });

  it('wires runAll: its own /metrics while it runs, or the hooks passed in', async () => {
    envs.push((env = await makeFleetEnv({ rows: 4, judgeUrl: judge.url })));
    const quiet = { update() {}, stop() {} };
    const port = await freePort();
    const slow = createScriptedAgent({ '*': { answer: '@gold', delay_ms: 300 } });
    const seen: number[] = [];
    let scraping = true;
    const scraper = (async () => {
      while (scraping) {
        const done = sample(await scrape(port), 'vcfleet_jobs_total', { role: 'run', queue: 'rollout', outcome: 'completed' });
        if (done !== undefined) seen.push(done);
        await sleep(100);
      }
    })();
    const first = await runAll({ config: env.config(['++run_id=served', `++metrics_server.port=${port}`]), logger: env.logger, agent: slow, progress: quiet });
    scraping = false;
    await scraper;
    expect(first.status).toBe('complete');
    expect(seen.some((n) => n >= 1)).toBe(true);
    expect(await scrape(port)).toBe(''); // closed with the run

    const metrics = createFleetMetrics({ role: 'run' });
    const tokens = createScriptedAgent({ '*': { answer: '@gold', input_tokens: 100, output_tokens: 10 } });
    const second = await runAll({ config: env.config(['++run_id=hooked']), logger: env.logger, agent: tokens, progress: quiet, metrics });
    expect(second.status).toBe('complete');
    const text = await metrics.registry.metrics();
    for (const queue of ['rollout', 'judge', 'results']) expect(sample(text, 'vcfleet_jobs_total', { queue, outcome: 'completed' }), queue).toBe(4);
    expect(sample(text, 'vcfleet_rows_committed_total', { result: 'new', kind: 'scored' })).toBe(4);
    expect(sample(text, 'vcfleet_judge_calls_total', { outcome: 'scored', verdict: 'equivalent' })).toBe(4);
    expect(sample(text, 'vcfleet_tokens_total', { model_role: 'policy', kind: 'input' })).toBe(400);
    expect(sample(text, 'vcfleet_tokens_total', { model_role: 'policy', kind: 'output' })).toBe(40);
    // Every verdict of this run came from the cache the first run filled: the judge's tokens count 0.
    expect(sample(text, 'vcfleet_judge_calls_total', { outcome: 'scored', verdict: 'equivalent', cached: 'true' })).toBe(4);
    expect(sample(text, 'vcfleet_tokens_total', { model_role: 'judge', kind: 'input' })).toBe(0);
    await metrics.close();
  });
});
