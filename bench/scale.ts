/**
 * Benchmark 3, scale: 100,000 queued rollouts (388 BabyVision-sized tasks x repeats) produced with
 * no workers running: Redis memory per queued rollout (INFO used_memory delta / rollouts) and the
 * producer's rate. Then a results consumer in its own process is fed rows of that run straight into
 * the results queue; its RSS and heap (after a full GC) at 1%, 10%, 50% and 100% of the rows show
 * whether its memory stays flat as rows grow.
 */
import { performance } from 'node:perf_hooks';
import { produceRun } from '../src/producer/produce.ts';
import { openQueue, rolloutId } from '../src/shared/queue/registry.ts';
import { createRedis } from '../src/shared/redis/connect.ts';
import { RowSchema, type Row } from '../src/shared/records/rows.ts';
import { MetricsAccumulator } from '../src/shared/output/metrics.ts';
import type { ConsumerSample } from './children/results-consumer.ts';
import { forkTs } from './lib/child.ts';
import { benchConfig, benchPrefix, deletePrefix, discardLogger, readBenchImage, syntheticTasks } from './lib/fleet.ts';
import type { BenchRedis } from './lib/redis-server.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, fmtInt, mib } from './lib/stats.ts';

export interface ScaleOptions {
  redis: BenchRedis;
  dir: string;
  /** Rollouts to queue (rounded up to whole repeats of 388 tasks). Default 100000. */
  rollouts: number;
  /** Rows fed to the results consumer. Default 100000. */
  rows: number;
  log?: (line: string) => void;
}

const TASKS = 388;

export async function benchScale(opts: ScaleOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const prefix = benchPrefix('scale');
  const repeats = Math.ceil(opts.rollouts / TASKS);
  const config = benchConfig({ redisUrl: opts.redis.url, dir: opts.dir, overrides: [`++num_repeats=${repeats}`] }, prefix);
  const client = createRedis(opts.redis.url, 'client');
  const rows: BenchRow[] = [];
  try {
    const tasks = syntheticTasks(TASKS);
    const before = await opts.redis.usedMemory();
    const t0 = performance.now();
    const produced = await produceRun({ config, redis: client, logger: discardLogger('info'), tasks, readImage: readBenchImage });
    const produceS = (performance.now() - t0) / 1000;
    const after = await opts.redis.usedMemory();
    const total = produced.total;
    // What every run pays once (run record, tasks, image), apart from what each queued rollout costs.
    const usage = async (key: string) => Number((await client.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
    const keys = config.queues.prefix;
    const fixed = (await usage(`${keys}:run:${produced.runId}`)) + (await usage(`${keys}:run:${produced.runId}:tasks`)) + (await usage(`${keys}:blob:${tasks[0].image_sha256}`));
    const enqueuedSet = await usage(`${keys}:run:${produced.runId}:enqueued`);
    const oneJob = await usage(`${keys}:rollout:${rolloutId(produced.runId, tasks[0].task_id, 0)}`);
    const perRollout = (after - before - fixed) / total;
    rows.push(
      {
        bench: '3 scale', metric: 'Redis memory per queued rollout', value: `${fmtInt(perRollout)} bytes`,
        note: `INFO used_memory delta ${mib(after - before)} for ${fmtInt(total)} rollouts (${TASKS} tasks x ${repeats} repeats), less ${fmtInt(fixed)} bytes the run pays once; of which a job hash ~${fmtInt(oneJob)} B and the run's enqueued set ${fmtInt(enqueuedSet / total)} B/rollout`,
      },
      { bench: '3 scale', metric: 'producer rate', value: `${fmtInt(total / produceS)} rollouts/s`, note: `${fmtInt(total)} rollouts queued in ${fmt(produceS, 1)} s (produceRun: run record, tasks, image, addBulk in chunks of 500)` },
    );
    log(`  ${fmtInt(total)} rollouts queued in ${fmt(produceS, 1)} s; ${fmtInt(perRollout)} bytes each`);
    // The queued rollouts are not needed for the consumer part: free them.
    const rolloutQueue = openQueue('rollout', client, prefix);
    await rolloutQueue.obliterate({ force: true });
    await rolloutQueue.close();
    rows.push(...(await consumerMemory(opts, prefix, produced.runId, tasks.map((t) => t.task_id), repeats, log)));
    rows.push(metricsRefreshCost(Math.min(opts.rows, total), repeats));
  } finally {
    await deletePrefix(client, prefix);
    client.disconnect();
  }
  return rows;
}

/**
 * The consumer refreshes each run's metrics file at most once a second from the metrics it keeps
 * row by row; how long one refresh takes with 10% and 100% of the rows added.
 */
function metricsRefreshCost(total: number, repeats: number): BenchRow {
  const time = (n: number) => {
    const acc = new MetricsAccumulator();
    for (let i = 0; i < n; i++) {
      acc.add({
        task_id: `bv-${i % TASKS}`, repeat: Math.floor(i / TASKS), type: `type-${i % 4}`, subtype: `subtype-${i % 9}`, reward: i % 3 === 0 ? 0 : 1,
        failure_kind: null, stop_reason: 'answered', turns: 3, tool_calls: 2, input_tokens: 5321, output_tokens: 812, wall_s: 84.2,
      });
    }
    acc.result(repeats);
    const t = performance.now();
    acc.result(repeats);
    return performance.now() - t;
  };
  const [small, large] = [time(Math.round(total / 10)), time(total)];
  return {
    bench: '3 scale', metric: 'one metrics refresh of the results consumer, 10% / 100% of rows', value: `${fmt(small)} / ${fmt(large)} ms`,
    note: `MetricsAccumulator.result() after ${fmtInt(total / 10)} / ${fmtInt(total)} rows, ${repeats} repeats (pass@1..${repeats}); it runs at most once a second on the consumer's event loop`,
  };
}

function rowFor(template: Row, runId: string, taskId: string, repeat: number): Row {
  return { ...template, run_id: runId, task_id: taskId, repeat, rollout_id: rolloutId(runId, taskId, repeat) };
}

async function consumerMemory(opts: ScaleOptions, prefix: string, runId: string, taskIds: string[], repeats: number, log: (l: string) => void): Promise<BenchRow[]> {
  const total = Math.min(opts.rows, taskIds.length * repeats);
  const thresholds = [...new Set([0.01, 0.1, 0.5, 1].map((f) => Math.max(1, Math.round(total * f))))];
  const consumer = forkTs<ConsumerSample | (Omit<ConsumerSample, 'kind'> & { kind: 'ready' })>(
    'bench/children/results-consumer.ts',
    [opts.redis.url, prefix, opts.dir, thresholds.join(',')],
    ['--expose-gc'],
  );
  const client = createRedis(opts.redis.url, 'client');
  try {
    const base = await consumer.next((m) => m.kind === 'ready');
    const template = RowSchema.parse({
      run_id: runId, rollout_id: 'x', task_id: 'x', repeat: 0, benchmark: 'babyvision_opencode', type: 'Visual Tracking', subtype: 'Maze',
      ans_type: 'choice', expected_answer: 'B', extracted_answer: 'B', reward: 1, judge_verdict: 'equivalent', judge_reason: 'The answers match.',
      stop_reason: 'answered', failure_kind: null, turns: 3, tool_calls: 2, input_tokens: 5321, output_tokens: 812, wall_s: 84.2,
      policy_model: 'policy', judge_model: 'gpt-4o-mini', error: null, finished_at: new Date().toISOString(),
    });
    const queue = openQueue('results', client, prefix);
    const t0 = performance.now();
    for (let i = 0; i < total; i += 1000) {
      const chunk = Array.from({ length: Math.min(1000, total - i) }, (_, k) => {
        const n = i + k;
        return { name: 'row', data: { v: 1 as const, row: rowFor(template, runId, taskIds[n % taskIds.length], Math.floor(n / taskIds.length)) } };
      });
      await queue.addBulk(chunk);
    }
    await queue.close();
    log(`  ${fmtInt(total)} rows fed to the results queue in ${fmt((performance.now() - t0) / 1000, 1)} s`);
    const samples: ConsumerSample[] = [];
    for (const t of thresholds) {
      const s = (await consumer.next((m) => m.kind === 'sample' && m.rows === t)) as ConsumerSample;
      samples.push(s);
      log(`  consumer at ${fmtInt(t)} rows: RSS ${mib(s.rss)}, heap ${mib(s.heapUsed)}`);
    }
    await consumer.exited;
    const at = (f: number) => samples.find((s) => s.rows === Math.max(1, Math.round(total * f)))!;
    const [s10, s50, s100] = [at(0.1), at(0.5), at(1)];
    const heapSlope = (s100.heapUsed - s10.heapUsed) / (s100.rows - s10.rows);
    const rssSlope = (s100.rss - s10.rss) / (s100.rows - s10.rows);
    const rate = (a: ConsumerSample, b: ConsumerSample) => (b.rows - a.rows) / ((b.atMs - a.atMs) / 1000);
    return [
      {
        bench: '3 scale', metric: 'results consumer heap slope (after GC)', value: `${fmtInt(heapSlope)} bytes/row`,
        note: `heap ${mib(base.heapUsed)} at start, ${samples.map((s) => `${mib(s.heapUsed)} at ${fmtInt(s.rows)}`).join(', ')} rows; ${fmt((heapSlope * 100_000) / 2 ** 20, 1)} MiB per 100k rows (what the consumer keeps per rollout: the ids of the rows in the file)`,
      },
      {
        bench: '3 scale', metric: 'results consumer RSS slope', value: `${fmtInt(rssSlope)} bytes/row`,
        note: `RSS ${mib(base.rss)} at start, ${samples.map((s) => `${mib(s.rss)} at ${fmtInt(s.rows)}`).join(', ')} rows`,
      },
      {
        bench: '3 scale', metric: 'results consumer rate, 10%->50% / 50%->100% of rows', value: `${fmtInt(rate(s10, s50))} / ${fmtInt(rate(s50, s100))} rows/s`,
        note: 'its own process, fed from a full results queue; a falling rate means per-row or per-second work grows with the rows held',
      },
    ];
  } finally {
    if (consumer.child.exitCode === null) consumer.child.kill('SIGTERM');
    client.disconnect();
  }
}
