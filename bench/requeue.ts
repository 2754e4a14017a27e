/**
 * Benchmark 10, a large rejudge: a run of 388 tasks x 8 repeats (3,104 rows) with 1,000 rows masked
 * judge_failed is rejudged (`rejudge`, the judge-worker and the results consumer of the fleet, in this
 * process) against a scripted judge that takes a fixed time per call. Reported: the rejudge's wall time
 * (from sending the rows back until every new row is in Redis and the JSONL is rewritten) over the
 * judge's own time for those calls (the time at least one call was in flight at the judge server;
 * goal <= 1.2), and the bytes written to the JSONL, beside the same rejudge with the file rewritten
 * after every replaced row (what the results consumer did before it batched the rewrites).
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import { produceRun } from '../src/producer/produce.ts';
import { openQueue, rolloutId } from '../src/shared/queue/registry.ts';
import { createRedis } from '../src/shared/redis/connect.ts';
import { buildRow, type Row } from '../src/shared/records/rows.ts';
import { rowContext } from '../src/shared/stores/row-context.ts';
import { responseTail, rolloutOutcome } from '../src/shared/records/rollout-outcome.ts';
import { RunStore } from '../src/shared/stores/run-store.ts';
import { rejudge } from '../src/ops/requeue.ts';
import { startScriptedJudgeServer } from '../src/demo/scripted-judge-server.ts';
import { createFleetJudge } from '../src/workers/judge/judge-factory.ts';
import { startJudgeWorker } from '../src/workers/judge/worker.ts';
import { startResultsWorker } from '../src/workers/results/worker.ts';
import { benchConfig, benchPrefix, deletePrefix, discardLogger, readBenchImage, syntheticTasks } from './lib/fleet.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, fmtInt, mib } from './lib/stats.ts';

export interface RequeueBenchOptions {
  redisUrl: string;
  dir: string;
  /** Tasks x repeats of the run. Default 388 x 8. */
  tasks: number;
  repeats: number;
  /** Rows masked judge_failed, then rejudged. Default 1000. */
  masked: number;
  /** Milliseconds the scripted judge takes per call. Default 40. */
  judgeMs: number;
  log?: (line: string) => void;
}

interface Side {
  wallS: number;
  judgeS: number;
  bytes: number;
  rewrites: number;
  fileBytes: number;
}

function deferredCount(n: number): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  if (n === 0) resolve();
  return { promise, resolve };
}

/** Seconds covered by at least one of the intervals (ms). */
function covered(intervals: Array<[number, number]>): number {
  const sorted = [...intervals].sort((a, b) => a[0] - b[0]);
  let total = 0;
  let end = -Infinity;
  let start = -Infinity;
  for (const [s, e] of sorted) {
    if (s > end) {
      if (end > start) total += end - start;
      start = s;
      end = e;
    } else end = Math.max(end, e);
  }
  if (end > start) total += end - start;
  return total / 1000;
}

async function side(opts: RequeueBenchOptions, rewriteEachRow: boolean): Promise<Side> {
  const prefix = benchPrefix(rewriteEachRow ? 'rejudge-each' : 'rejudge');
  const intervals: Array<[number, number]> = [];
  const judgeServer = await startScriptedJudgeServer({
    script: async () => {
      const t = performance.now();
      await sleep(opts.judgeMs);
      intervals.push([t, performance.now()]);
      return 'grade' as const;
    },
  });
  const config = benchConfig({ redisUrl: opts.redisUrl, dir: opts.dir, overrides: [
    `++num_repeats=${opts.repeats}`, `++visual_coding_opencode_judge_base_url=${judgeServer.url}`, '++judge.api_key=bench-judge-key', '++judge.cache=false',
  ] }, prefix);
  const logger = discardLogger('warn');
  const client = createRedis(opts.redisUrl, 'client');
  const worker = createRedis(opts.redisUrl, 'worker');
  const store = new RunStore(client, prefix);
  try {
    // The run, produced, its rollouts then taken out of the queue: every row is written here instead.
    const tasks = syntheticTasks(opts.tasks);
    const produced = await produceRun({ config, redis: client, logger, tasks, readImage: readBenchImage });
    const rollouts = openQueue('rollout', client, prefix);
    await rollouts.obliterate({ force: true });
    await rollouts.close();
    const run = await store.requireRun(produced.runId);
    let n = 0;
    for (let repeat = 0; repeat < opts.repeats; repeat++) {
      for (const task of tasks) {
        const id = rolloutId(run.run_id, task.task_id, repeat);
        const outcome = rolloutOutcome({ stop_reason: 'answered', extracted_answer: task.gold, turns: 3, tool_calls: 2, input_tokens: 5000, output_tokens: 400, wall_s: 30, ...responseTail(`The answer is \\boxed{${task.gold}}`) });
        const ctx = rowContext(run, task, { repeat, rollout_id: id });
        const masked = n++ < opts.masked;
        const row: Row = buildRow(ctx, outcome, masked ? { kind: 'masked', failure: 'judge_failed', error: 'judge down' } : { kind: 'scored', verdict: 'equivalent', reason: 'same', reward: 1 });
        await store.putRow(row);
        if (masked) await store.putOutcome(run.run_id, id, outcome);
      }
    }
    let replaced = 0;
    const allReplaced = deferredCount(opts.masked);
    const results = startResultsWorker({
      config, connection: worker, logger,
      onCommit: (_row, result) => {
        if (rewriteEachRow) void out.flush();
        if (result === 'replaced' && ++replaced === opts.masked) allReplaced.resolve();
      },
    });
    await results.ready;
    const out = await results.syncRun(run.run_id);
    const before = { ...out.writes };
    const judge = await startJudgeWorker({ config, connection: worker, logger, judge: createFleetJudge(config, logger, worker) });
    const t0 = performance.now();
    const { sent } = await rejudge(client, prefix, run.run_id, logger, config.queues);
    if (sent !== opts.masked) throw new Error(`rejudge sent ${sent} rows, not ${opts.masked}`);
    // Done when every row was replaced and the file rewritten since (one more flush at most).
    await allReplaced.promise;
    await out.flush();
    const wallS = (performance.now() - t0) / 1000;
    const file = readFileSync(out.jsonlPath, 'utf8').trim().split('\n');
    if (file.length !== run.total || file.some((l) => (JSON.parse(l) as Row).failure_kind !== null)) throw new Error('the JSONL does not hold every rejudged row');
    await judge.close();
    await results.close();
    return { wallS, judgeS: covered(intervals), bytes: out.writes.bytes - before.bytes, rewrites: out.writes.rewrites - before.rewrites, fileBytes: Buffer.byteLength(file.join('\n')) };
  } finally {
    await judgeServer.close();
    await deletePrefix(client, prefix);
    client.disconnect();
    worker.disconnect();
  }
}

export async function benchRequeue(opts: RequeueBenchOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => undefined);
  const size = `${fmtInt(opts.masked)} of ${fmtInt(opts.tasks * opts.repeats)} rows, judge ${opts.judgeMs} ms per call`;
  log(`  batched rewrites: ${size}`);
  const batched = await side(opts, false);
  log(`  rewrite after every row (before): ${size}`);
  const each = await side(opts, true);
  const note = (s: Side) => `wall ${fmt(s.wallS, 1)} s, judge busy ${fmt(s.judgeS, 1)} s; ${fmtInt(s.rewrites)} whole-file rewrites of a ${mib(s.fileBytes)} JSONL`;
  return [
    { bench: '10 rejudge', metric: 'wall / judge time, batched rewrites (goal <= 1.2)', value: fmt(batched.wallS / batched.judgeS), note: `${size}; ${note(batched)}` },
    { bench: '10 rejudge', metric: 'wall / judge time, a rewrite per row (before)', value: fmt(each.wallS / each.judgeS), note: note(each) },
    { bench: '10 rejudge', metric: 'written to the JSONL, batched vs per row', value: `${mib(batched.bytes)} vs ${mib(each.bytes)}`, note: `${fmt(each.bytes / Math.max(1, batched.bytes), 0)}x fewer bytes` },
  ];
}
