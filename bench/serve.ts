/**
 * Benchmark 13, serve: N concurrent `POST /run` requests to `vcfleet serve --with-workers` against
 * `vcfleet run` of the same N tasks, one after the other on this machine, each its own OS process
 * with the same sandbox concurrency: the real OpenCode in `local` sandboxes, a scripted policy that
 * takes a fixed time per call (a bash call, then the answer: 2 calls per rollout), the scripted judge.
 * Each side is timed from its process's start to its last result (serve: the last response a client
 * got; run: the process's exit after its last row). Reported: rollouts per hour of each side, the
 * service's overhead per rollout (the difference of the two times, per rollout), and how long a
 * response took to reach its client after its row was made (the results consumer's commit, the
 * response built and left in Redis, serve woken, the HTTP answer).
 */
import http from 'node:http';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../src/shared/config.ts';
import { loadOrPrepare } from '../src/prepare/load-or-prepare.ts';
import { RowSchema, type Row } from '../src/shared/rows.ts';
import { scripts } from '../src/demo/scripted-policy-scripts.ts';
import { startScriptedPolicyServer, type Script } from '../src/demo/scripted-policy-server.ts';
import { startScriptedJudgeServer } from '../src/demo/scripted-judge-server.ts';
import { writeFixtureParquet } from '../test/helpers/fixture-parquet.ts';
import { runCli, startCli, waitFor } from '../test/helpers/fleet.ts';
import { benchPrefix, discardLogger } from './lib/fleet.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, median, quantile } from './lib/stats.ts';

export interface ServeBenchOptions {
  redisUrl: string;
  dir: string;
  /** Concurrent `/run` requests (and tasks of the `vcfleet run` side). Default 64. */
  requests: number;
  /** Sessions at once of the sandbox role (`queues.rollout_concurrency`), both sides. Default 8. */
  concurrency: number;
  /** Seconds the scripted policy takes per call. Default 2. */
  delayS: number;
  log?: (line: string) => void;
}

function delayed(script: Script, ms: number): Script {
  return async (body, index, ctx) => {
    await sleep(ms);
    return script(body, index, ctx);
  };
}

/** POST a body and read the JSON answer, with no client timeout (a rollout may wait in the queue for minutes). */
function postJson(url: string, body: string): Promise<{ status: number; json: Record<string, unknown>; at: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>, at: Date.now() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const readRows = (file: string): Row[] => readFileSync(file, 'utf8').trim().split('\n').map((l) => RowSchema.parse(JSON.parse(l)));

export async function benchServe(opts: ServeBenchOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const n = opts.requests;
  const fixture = writeFixtureParquet(path.join(opts.dir, 'serve-bench.parquet'), { rows: n });
  const table = Object.fromEntries(fixture.expected.map((t) => [t.question, t.gold]));
  const policy = await startScriptedPolicyServer({ script: delayed(scripts.demo(table), opts.delayS * 1000), modelName: 'toy' });
  const judge = await startScriptedJudgeServer();
  const overrides = (side: string) => [
    `++redis_url=${opts.redisUrl}`, `++queues.prefix=${benchPrefix(`serve-${side}`)}`, `++babyvision_parquet=${fixture.path}`,
    `++data_dir=${path.join(opts.dir, 'serve-data')}`, `++state_dir=${path.join(opts.dir, `serve-state-${side}`)}`,
    `++output_jsonl_fpath=${path.join(opts.dir, `serve-${side}.jsonl`)}`, `++policy_base_url=${policy.url}`, '++policy_model_name=toy',
    `++visual_coding_opencode_judge_base_url=${judge.url}`, `++queues.rollout_concurrency=${opts.concurrency}`, `++queues.rollout_global_concurrency=${opts.concurrency}`,
    '++task_timeout_s=900', '++preflight.require_redis_persistence=false', '++judge.rate_limit_per_s=1000',
  ];
  const env = { POLICY_API_KEY: 'sk-bench-serve', OPENAI_API_KEY: 'sk-bench-judge' };
  try {
    // The same tasks on both sides: the serve side's rows are the prepared tasks, as the reference's dataset holds them.
    const config = loadConfig({ env: {}, overrides: overrides('rows') });
    const bench = await loadOrPrepare(config, discardLogger('warn'));
    const bodies = await Promise.all(bench.tasks.map(async (t, i) => JSON.stringify({
      responses_create_params: { input: [{ role: 'user', type: 'message', content: [
        { type: 'input_image', image_url: `data:${t.image_mime};base64,${(await bench.readImage(t)).toString('base64')}`, detail: 'auto' },
        { type: 'input_text', text: t.prompt },
      ] }] },
      expected_answer: t.gold, question: t.question, source_id: t.task_id, category: t.type, l2_category: t.subtype, ans_type: t.ans_type,
      _ng_task_index: i, _ng_rollout_index: 0, _ng_rollout_id: `bench-${i}`,
    })));

    const runArgs = overrides('run');
    const runStart = performance.now();
    const run = await runCli(['run', '--benchmark', 'babyvision_opencode', ...runArgs], env);
    const runS = (performance.now() - runStart) / 1000;
    if (run.code !== 0) throw new Error(`vcfleet run exited ${run.code}: ${run.output.slice(-2000)}`);
    const runRows = readRows(path.join(opts.dir, 'serve-run.jsonl'));
    log(`  vcfleet run: ${n} rollouts in ${fmt(runS)} s (${runRows.filter((r) => r.reward === 1).length} reward 1)`);

    const serveArgs = overrides('serve');
    const serveStart = Date.now();
    const serve = startCli(['serve', '--with-workers', '--port', '0', ...serveArgs], env);
    let answers: Array<{ status: number; json: Record<string, unknown>; at: number }>;
    try {
      const url = await waitFor('serve to print its URL', () => /serve: (http:\/\/\S+\/) /.exec(serve.stdout())?.[1], 120_000);
      answers = await Promise.all(bodies.map((b) => postJson(`${url}run`, b)));
    } finally {
      serve.child.kill('SIGTERM');
      await serve.exited;
    }
    const serveS = (Math.max(...answers.map((a) => a.at)) - serveStart) / 1000;
    const bad = answers.filter((a) => a.status !== 200);
    if (bad.length) throw new Error(`${bad.length} /run answered ${bad[0].status}: ${JSON.stringify(bad[0].json).slice(0, 300)}`);
    const serveRows = new Map(readRows(path.join(opts.dir, 'serve-serve.jsonl')).map((r) => [r.rollout_id, r]));
    const delivery = answers.map((a) => (a.at - Date.parse(serveRows.get(a.json.rollout_id as string)!.finished_at)) / 1000);
    const rewarded = answers.filter((a) => a.json.reward === 1).length;
    log(`  vcfleet serve: ${n} concurrent /run answered in ${fmt(serveS)} s (${rewarded} reward 1)`);
    const perHour = (s: number) => fmt((n / s) * 3600, 0);
    const setup = `${n} rollouts, ${opts.concurrency} sandboxes at once, policy ${opts.delayS} s per call (2 calls per rollout), real OpenCode, one run of each side`;
    return [
      { bench: '13 serve', metric: 'rollouts per hour: serve (concurrent POST /run) vs vcfleet run', value: `${perHour(serveS)} vs ${perHour(runS)} (${fmt(serveS / runS, 2)}x the time)`, note: `${setup}; serve ${fmt(serveS)} s, run ${fmt(runS)} s, each from its process's start` },
      { bench: '13 serve', metric: "service overhead per rollout (serve's time - run's, per rollout)", value: `${fmt((serveS - runS) / n, 2)} s`, note: `${rewarded}/${n} serve and ${runRows.filter((r) => r.reward === 1).length}/${runRows.length} run rollouts earned reward 1` },
      {
        bench: '13 serve', metric: "a rollout's own time (the row's wall_s), median: serve vs run",
        value: `${fmt(median([...serveRows.values()].map((r) => r.wall_s)))} vs ${fmt(median(runRows.map((r) => r.wall_s)))} s`,
        note: 'the sandbox session alone: a difference here is the machine, not the service',
      },
      { bench: '13 serve', metric: 'row made -> response at the client (median / p90 / max)', value: `${fmt(median(delivery), 3)} / ${fmt(quantile(delivery, 0.9), 3)} / ${fmt(Math.max(...delivery), 3)} s`, note: 'results commit, verify-response built and left in Redis, serve woken by its channel, HTTP answer' },
    ];
  } finally {
    await policy.close();
    await judge.close();
  }
}
