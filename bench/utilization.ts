/**
 * Benchmark 2, utilization: simulated agent durations from a seeded lognormal (long-tailed)
 * distribution, run by K real `vcfleet worker sandbox` OS processes with C slots each (a scripted
 * agent whose script file maps every task to its delay); the judge-worker (no-op judge), the results
 * consumer and the producer run in this process. Makespan (first enqueue -> last row written) is
 * divided by the ideal, sum of durations / (K x C), and by the makespan of greedy FIFO list
 * scheduling of the same durations (the best any queue can do in that order).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { produceRun } from '../src/producer/produce.ts';
import { createRedis } from '../src/shared/redis/connect.ts';
import { startJudgeWorker } from '../src/workers/judge/worker.ts';
import { startResultsWorker } from '../src/workers/results/worker.ts';
import { startSandboxProcess, type WorkerProcess } from './lib/sandbox-worker.ts';
import { benchConfig, benchPrefix, deferred, deletePrefix, discardLogger, noopJudge, readBenchImage, syntheticTasks } from './lib/fleet.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, listScheduleMakespan, lognormalSamples, quantile } from './lib/stats.ts';

export interface UtilizationOptions {
  redisUrl: string;
  dir: string;
  /** Simulated rollouts. Default 360. */
  tasks: number;
  /** Sandbox-worker processes (K). Default 2. */
  processes: number;
  /** Rollouts at once per process (C). Default 4. */
  slots: number;
  /** Median simulated duration, seconds. Default 1.5. */
  medianS: number;
  /** Sigma of the underlying normal. Default 0.75. */
  sigma: number;
  seed: number;
  log?: (line: string) => void;
}

export async function benchUtilization(opts: UtilizationOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const slots = opts.processes * opts.slots;
  const durationsS = lognormalSamples(opts.tasks, opts.medianS, opts.sigma, opts.seed);
  const delaysMs = durationsS.map((d) => Math.max(1, Math.round(d * 1000)));
  const tasks = syntheticTasks(opts.tasks);
  const scriptPath = path.join(opts.dir, 'utilization-script.json');
  writeFileSync(scriptPath, JSON.stringify(Object.fromEntries(tasks.map((t, i) => [t.task_id, { answer: '@gold', delay_ms: delaysMs[i] }]))));
  const prefix = benchPrefix('util');
  const overrides = [
    `++redis_url=${opts.redisUrl}`,
    `++queues.prefix=${prefix}`,
    `++agent.kind=scripted`,
    `++agent.script_path=${scriptPath}`,
    `++queues.rollout_global_concurrency=${Math.max(32, slots)}`,
    `++output_jsonl_fpath=${path.join(opts.dir, `${prefix}.jsonl`)}`,
  ];
  const config = benchConfig({ redisUrl: opts.redisUrl, dir: opts.dir, overrides }, prefix);
  const logger = discardLogger('info');
  const client = createRedis(opts.redisUrl, 'client');
  const connection = createRedis(opts.redisUrl, 'worker');
  const committed: number[] = [];
  const allDone = deferred();
  const results = startResultsWorker({
    config, connection, logger,
    onCommit: () => {
      committed.push(performance.now());
      if (committed.length === opts.tasks) allDone.resolve();
    },
  });
  const workers: WorkerProcess[] = [];
  try {
    await results.ready;
    const judge = await startJudgeWorker({ config, connection, logger, judge: noopJudge });
    try {
      for (let k = 0; k < opts.processes; k++) workers.push(startSandboxProcess(overrides, opts.slots));
      await Promise.all(workers.map((w) => w.ready));
      log(`  ${opts.processes} sandbox-worker processes ready; producing ${opts.tasks} rollouts`);
      const t0 = performance.now();
      await produceRun({ config, redis: client, logger, tasks, readImage: readBenchImage });
      await allDone.promise;
      const makespan = (Math.max(...committed) - t0) / 1000;
      const sum = durationsS.reduce((a, b) => a + b, 0);
      const ideal = sum / slots;
      const greedy = listScheduleMakespan(durationsS, slots);
      const ratio = makespan / ideal;
      const dist = `lognormal, median ${opts.medianS} s, sigma ${opts.sigma}, seed ${opts.seed}: mean ${fmt(sum / opts.tasks)} s, p99 ${fmt(quantile(durationsS, 0.99))} s, max ${fmt(Math.max(...durationsS))} s`;
      return [
        {
          bench: '2 utilization', metric: 'makespan / ideal (sum of durations / slots)', value: fmt(ratio, 3), target: '<= 1.05', ok: ratio <= 1.05,
          note: `${opts.tasks} rollouts on ${opts.processes} \`vcfleet worker sandbox\` OS processes x ${opts.slots} slots; makespan ${fmt(makespan, 1)} s, ideal ${fmt(ideal, 1)} s; durations ${dist}`,
        },
        {
          bench: '2 utilization', metric: 'greedy FIFO list schedule / ideal', value: fmt(greedy / ideal, 3),
          note: `the floor set by the durations' tail alone (${fmt(greedy, 1)} s), with zero dispatch overhead`,
        },
        {
          bench: '2 utilization', metric: 'makespan / greedy FIFO list schedule', value: fmt(makespan / greedy, 3),
          note: `the fleet's own share: ${fmt(((makespan - greedy) * 1000 * slots) / opts.tasks, 0)} ms of slot time per rollout (pickup, Redis reads, routing, judge, row write)`,
        },
      ];
    } finally {
      for (const w of workers) w.child.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.exited));
      await judge.close(1000);
    }
  } finally {
    await results.close(1000);
    await deletePrefix(client, prefix);
    client.disconnect();
    connection.disconnect();
  }
}
