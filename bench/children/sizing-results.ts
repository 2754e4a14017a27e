/**
 * Benchmark 15's results writer: the real results consumer in its own process (as the one
 * `vcfleet worker results` pod runs it), noting for each committed row the time from the row being
 * built (its `finished_at`, set when the judge stage ends) to the row written. Told over IPC:
 *
 *   { kind: 'take' } -> answers { kind: 'rows', rows, lagsMs } for the rows committed since the last take
 *   { kind: 'stop' } -> closes the consumer and exits
 *
 * Arguments: <redisUrl> <prefix> <dir>
 */
import { createRedis, resolveRedisEndpoint } from '../../src/shared/redis/connect.ts';
import { startResultsWorker } from '../../src/workers/results/worker.ts';
import { benchConfig, discardLogger } from '../lib/fleet.ts';

export type ResultsMessage = { kind: 'ready' } | { kind: 'rows'; rows: number; lagsMs: number[] };

const [redisUrl, prefix, dir] = process.argv.slice(2);
const config = benchConfig({ redisUrl, dir }, prefix);
const connection = createRedis(resolveRedisEndpoint(config), 'worker');
let lags: number[] = [];
const results = startResultsWorker({
  config,
  connection,
  logger: discardLogger('info'),
  onCommit: (row, result) => {
    if (result === 'new') lags.push(Date.now() - Date.parse(row.finished_at));
  },
});
process.on('message', (raw) => {
  const m = raw as { kind: string };
  if (m.kind === 'take') {
    process.send!({ kind: 'rows', rows: lags.length, lagsMs: lags } satisfies ResultsMessage);
    lags = [];
  } else if (m.kind === 'stop') {
    void results.close(0).finally(() => {
      connection.disconnect();
      process.exit(0);
    });
  }
});
// Gone with the benchmark: end too.
process.on('disconnect', () => void results.close(0).finally(() => process.exit(0)));
if (!(await results.ready)) throw new Error('the results consumer closed before it held the writer lock');
process.send!({ kind: 'ready' } satisfies ResultsMessage);
