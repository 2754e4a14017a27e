/**
 * Benchmark 13, serve: N concurrent `POST /run` requests to `vcfleet serve --with-workers` against
 * `vcfleet run` of the same N tasks, each its own OS process with the same sandbox concurrency: the
 * real OpenCode in `local` sandboxes, a scripted policy that takes a fixed time per call (a bash call,
 * then the answer: 2 calls per rollout), the scripted judge. The sides are interleaved in rounds
 * (run, serve, then serve, run, ...: a drift of the host's load falls on both), at each N asked.
 * Reported per N: each side's median rollout time (serve: request sent -> response at its client;
 * run: job added -> row committed) and their ratio, each side's median phase times (lib/serve-phases.ts:
 * accept, queue wait, sandbox, judge, results, response), each round's makespan, and how long a
 * response took to reach its client after its row was committed.
 */
import http from 'node:http';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../src/shared/config/load.ts';
import { loadOrPrepare } from '../src/prepare/load-or-prepare.ts';
import { RowSchema, type Row } from '../src/shared/records/rows.ts';
import { scripts } from '../src/demo/scripted-policy-scripts.ts';
import { startScriptedPolicyServer, type Script } from '../src/demo/scripted-policy-server.ts';
import { startScriptedJudgeServer } from '../src/demo/scripted-judge-server.ts';
import { writeFixtureParquet } from '../test/helpers/fixture-parquet.ts';
import { runCli, startCli, waitFor } from '../test/helpers/fleet.ts';
import { benchPrefix, discardLogger } from './lib/fleet.ts';
import type { BenchRow } from './lib/report.ts';
import { phaseText, readPhases, type ClientTimes, type RolloutTiming } from './lib/serve-phases.ts';
import { fmt, median } from './lib/stats.ts';

export interface ServeBenchOptions {
  redisUrl: string;
  dir: string;
  /** Concurrent `/run` requests (and tasks of the `vcfleet run` side), one measure per number. Default 8 and 64. */
  requests: readonly number[];
  /** Rounds of both sides at each number (run then serve, then serve then run, ...). Default 2. */
  rounds: number;
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

/** One side of one round: its rollouts' timings and its makespan (s). */
interface SideResult {
  timings: RolloutTiming[];
  makespanS: number;
  rewarded: number;
  /** Serve only: row committed -> response at the client (s). */
  delivery: number[];
}

export async function benchServe(opts: ServeBenchOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const policy = await startScriptedPolicyServer({ script: delayed(scripts.demo({}), opts.delayS * 1000), modelName: 'toy' });
  const judge = await startScriptedJudgeServer();
  const env = { POLICY_API_KEY: 'sk-bench-serve', OPENAI_API_KEY: 'sk-bench-judge' };
  const rows: BenchRow[] = [];
  try {
    for (const n of opts.requests) {
      const fixture = writeFixtureParquet(path.join(opts.dir, `serve-bench-${n}.parquet`), { rows: n });
      policy.setScript(delayed(scripts.demo(Object.fromEntries(fixture.expected.map((t) => [t.question, t.gold]))), opts.delayS * 1000));
      const overrides = (tag: string) => [
        `++redis_url=${opts.redisUrl}`, `++queues.prefix=${benchPrefix(`serve-${tag}`)}`, `++babyvision_parquet=${fixture.path}`,
        `++data_dir=${path.join(opts.dir, `serve-data-${n}`)}`, `++state_dir=${path.join(opts.dir, `serve-state-${tag}`)}`,
        `++output_jsonl_fpath=${path.join(opts.dir, `serve-${tag}.jsonl`)}`, `++policy_base_url=${policy.url}`, '++policy_model_name=toy',
        `++visual_coding_opencode_judge_base_url=${judge.url}`, `++queues.rollout_concurrency=${opts.concurrency}`, `++queues.rollout_global_concurrency=${opts.concurrency}`,
        '++task_timeout_s=900', '++preflight.require_redis_persistence=false', '++judge.rate_limit_per_s=1000',
      ];
      // The same tasks on both sides: the serve side's rows are the prepared tasks, as the reference's dataset holds them.
      const bench = await loadOrPrepare(loadConfig({ env: {}, overrides: overrides(`rows-${n}`) }), discardLogger('warn'));
      const bodies = await Promise.all(bench.tasks.map(async (t, i) => ({
        responses_create_params: { input: [{ role: 'user', type: 'message', content: [
          { type: 'input_image', image_url: `data:${t.image_mime};base64,${(await bench.readImage(t)).toString('base64')}`, detail: 'auto' },
          { type: 'input_text', text: t.prompt },
        ] }] },
        expected_answer: t.gold, question: t.question, source_id: t.task_id, category: t.type, l2_category: t.subtype, ans_type: t.ans_type,
        _ng_task_index: i, _ng_rollout_index: 0,
      })));
      const sides: Record<'run' | 'serve', SideResult[]> = { run: [], serve: [] };
      for (let round = 0; round < opts.rounds; round++) {
        for (const side of round % 2 === 0 ? (['run', 'serve'] as const) : (['serve', 'run'] as const)) {
          const tag = `${side}-${n}-${round}`;
          const args = overrides(tag);
          const result = side === 'run' ? await runSide(opts.redisUrl, args, env, path.join(opts.dir, `serve-${tag}.jsonl`)) : await serveSide(opts.redisUrl, args, env, bodies, round);
          sides[side].push(result);
          log(`  N=${n} round ${round + 1} ${side}: makespan ${fmt(result.makespanS)} s, median rollout ${fmt(median(result.timings.map((t) => t.total)))} s (${result.timings.length} timed, ${result.rewarded} reward 1)`);
        }
      }
      rows.push(...report(n, opts, sides));
    }
    return rows;
  } finally {
    await policy.close();
    await judge.close();
  }
}

async function runSide(redisUrl: string, args: string[], env: Record<string, string>, jsonl: string): Promise<SideResult> {
  const start = performance.now();
  const run = await runCli(['run', '--benchmark', 'babyvision_opencode', ...args], env);
  const makespanS = (performance.now() - start) / 1000;
  if (run.code !== 0) throw new Error(`vcfleet run exited ${run.code}: ${run.output.slice(-2000)}`);
  const written = readRows(jsonl);
  const prefix = args.find((a) => a.startsWith('++queues.prefix='))!.split('=')[1];
  const timings = await readPhases(redisUrl, prefix, written[0].run_id);
  return { timings, makespanS, rewarded: written.filter((r) => r.reward === 1).length, delivery: [] };
}

async function serveSide(redisUrl: string, args: string[], env: Record<string, string>, bodies: readonly object[], round: number): Promise<SideResult> {
  const serve = startCli(['serve', '--with-workers', '--port', '0', ...args], env);
  const clients = new Map<string, ClientTimes>();
  let answers: Array<{ status: number; json: Record<string, unknown>; at: number; sentAt: number }>;
  let start = 0;
  try {
    const url = await waitFor('serve to print its URL', () => /serve: (http:\/\/\S+\/) /.exec(serve.stdout())?.[1], 120_000);
    start = Date.now();
    answers = await Promise.all(bodies.map(async (b, i) => {
      const sentAt = Date.now();
      return { ...(await postJson(`${url}run`, JSON.stringify({ ...b, _ng_rollout_id: `round${round}-task${i}-r0` }))), sentAt };
    }));
  } finally {
    serve.child.kill('SIGTERM');
    await serve.exited;
  }
  const bad = answers.filter((a) => a.status !== 200);
  if (bad.length) throw new Error(`${bad.length} /run answered ${bad[0].status}: ${JSON.stringify(bad[0].json).slice(0, 300)}`);
  for (const a of answers) clients.set(a.json.rollout_id as string, { sentAt: a.sentAt, receivedAt: a.at });
  const prefix = args.find((a) => a.startsWith('++queues.prefix='))!.split('=')[1];
  const timings = await readPhases(redisUrl, prefix, answers[0].json.run_id as string, clients);
  return { timings, makespanS: (Math.max(...answers.map((a) => a.at)) - start) / 1000, rewarded: answers.filter((a) => a.json.reward === 1).length, delivery: timings.map((t) => t.phases.response) };
}

function report(n: number, opts: ServeBenchOptions, sides: Record<'run' | 'serve', SideResult[]>): BenchRow[] {
  const all = (side: 'run' | 'serve') => sides[side].flatMap((r) => r.timings);
  const med = (side: 'run' | 'serve') => median(all(side).map((t) => t.total));
  const ratio = med('serve') / med('run');
  const makespans = (side: 'run' | 'serve') => sides[side].map((r) => fmt(r.makespanS)).join(', ');
  const setup = `${n} concurrent, ${opts.concurrency} sandboxes at once, policy ${opts.delayS} s per call (2 calls per rollout), real OpenCode, ${opts.rounds} interleaved round(s) per side`;
  const delivery = sides.serve.flatMap((r) => r.delivery);
  return [
    {
      bench: '13 serve', metric: `serve / run, median rollout time at N=${n}`, value: fmt(ratio, 2), target: '<= 1.05', ok: ratio <= 1.05,
      note: `${setup}; median rollout ${fmt(med('serve'))} s (serve: request sent -> response) vs ${fmt(med('run'))} s (run: job added -> row); makespans serve ${makespans('serve')} s, run ${makespans('run')} s`,
    },
    { bench: '13 serve', metric: `phases at N=${n}, medians (s): serve`, value: phaseText(all('serve')), note: `${all('serve').length} rollouts` },
    { bench: '13 serve', metric: `phases at N=${n}, medians (s): run`, value: phaseText(all('run')), note: `${all('run').length} rollouts; accept and response do not apply to a run` },
    { bench: '13 serve', metric: `row committed -> response at the client at N=${n} (median / max)`, value: `${fmt(median(delivery), 3)} / ${fmt(Math.max(...delivery), 3)} s`, note: 'verify-response built and left in Redis, serve woken by its channel, HTTP answer' },
  ];
}
