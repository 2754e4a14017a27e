/**
 * A results consumer in its own process (as `vcfleet worker results` runs it), reporting its memory
 * over IPC when the committed rows reach each threshold: RSS, and heap after a full GC (run with
 * --expose-gc). Arguments: <redisUrl> <prefix> <dir> <threshold,threshold,...>
 */
import { performance } from 'node:perf_hooks';
import { createRedis } from '../../src/shared/redis/connect.ts';
import { startResultsWorker } from '../../src/workers/results/worker.ts';
import { benchConfig, discardLogger } from '../lib/fleet.ts';

export interface ConsumerSample {
  kind: 'sample';
  rows: number;
  rss: number;
  heapUsed: number;
  external: number;
  /** Milliseconds since the consumer took its first row. */
  atMs: number;
}

const [redisUrl, prefix, dir, list] = process.argv.slice(2);
const thresholds = list.split(',').map(Number);
const gc = (globalThis as { gc?: () => void }).gc;
const config = benchConfig({ redisUrl, dir }, prefix);
const connection = createRedis(redisUrl, 'worker');
let rows = 0;
let first = 0;
const last = thresholds[thresholds.length - 1];
let finish!: () => void;
const finished = new Promise<void>((r) => (finish = r));
const sample = (): ConsumerSample => {
  gc?.();
  const m = process.memoryUsage();
  return { kind: 'sample', rows, rss: m.rss, heapUsed: m.heapUsed, external: m.external, atMs: performance.now() - first };
};
const results = startResultsWorker({
  config,
  connection,
  logger: discardLogger('info'),
  onCommit: () => {
    if (rows++ === 0) first = performance.now();
    if (thresholds.includes(rows)) process.send!(sample());
    if (rows === last) finish();
  },
});
await results.ready;
process.send!({ ...sample(), kind: 'ready' });
await finished;
await results.close(1000);
connection.disconnect();
process.disconnect();
