/**
 * The Python client of docs/train.md, as written there, run by python3 against a real `vcfleet serve`
 * HTTP server (credentials set, `serve.max_pending=1`, the real results consumer, real Redis; no
 * sandbox worker: the test cuts each step's straggler with `POST /cancel`). The client sends the token
 * from its environment, puts the step in every id and sends it as the weight version, waits out the
 * 429 of the bound (Retry-After) and posts again, and gets every response back.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/shared/config/load.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { ServePending } from '../../src/shared/stores/serve-pending.ts';
import { createServiceRun } from '../../src/producer/produce.ts';
import { RolloutService } from '../../src/serve/rollout-service.ts';
import { startServeServer, type ServeServer } from '../../src/serve/server.ts';
import { startResultsWorker, type ResultsWorker } from '../../src/workers/results/worker.ts';
import { REDIS_URL } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { waitFor } from '../helpers/wait.ts';
import { gymRow } from '../helpers/serve.ts';

const TOKEN = 'serve-token-PYCLIENT-36';
const prefix = `vcftest-serve-${randomBytes(4).toString('hex')}`;
const logger = createLogger({ level: 'silent' });
const hasPython = spawnSync('python3', ['--version']).status === 0;

/** The client's code block in docs/train.md, as a reader copies it. */
function clientCode(): string {
  const doc = readFileSync(path.join(import.meta.dirname, '../../docs/train.md'), 'utf8');
  const section = doc.slice(doc.indexOf('### A client in Python'));
  const m = /```python\n([\s\S]*?)```/.exec(section);
  if (!m) throw new Error('docs/train.md has no python block under "A client in Python"');
  return m[1];
}

describe.skipIf(!hasPython)("docs/train.md's Python client against a real serve", () => {
  let redis: Redis;
  let service: RolloutService;
  let results: ResultsWorker;
  let server: ServeServer;
  let dir: string;
  let runId: string;

  beforeAll(async () => {
    redis = createRedis(REDIS_URL, 'worker');
    dir = createTmpDir('vcfleet-pyclient-');
    const config = loadConfig({
      overrides: [`++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`, '++run_id=py-client', `++output_jsonl_fpath=${path.join(dir, 'out.jsonl')}`, '++serve.port=0', '++serve.max_pending=1', `++dashboard.token=${TOKEN}`],
      env: {},
    });
    const { run } = await createServiceRun({ config, redis, logger });
    runId = run.run_id;
    service = new RolloutService({ config, redis, run, logger });
    results = startResultsWorker({ config, connection: redis, logger, scope: run.queue_scope });
    await results.ready;
    server = await startServeServer({ config, logger, service });
  });
  afterAll(async () => {
    await server?.close();
    await results?.close(1000);
    await service?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
    removeTmpDirs();
  });

  it('sends the token and the step, waits out 429 with Retry-After, and gets every response', async () => {
    writeFileSync(path.join(dir, 'client.py'), clientCode());
    const rows = [0, 1].map((i) => JSON.stringify(gymRow(`Puzzle ${i}?`, 'A', { _ng_task_index: i, _ng_rollout_index: 0 })));
    writeFileSync(path.join(dir, 'rows.jsonl'), `${rows.join('\n')}\n`);
    const child = spawn('python3', ['client.py', 'rows.jsonl', 'step-3'], { cwd: dir, env: { ...process.env, VCFLEET_SERVE_URL: server.url.replace(/\/$/, ''), VCFLEET_DASHBOARD_TOKEN: TOKEN } });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    const pending = new ServePending(redis, prefix);
    // A request takes its place in the bound first, then keeps its record and job: wait for the job too.
    const rollouts = openQueue('rollout', redis, prefix, { scope: runId });
    const jobs = () => rollouts.count();
    const cancelStep = async () => {
      const res = await fetch(`${server.url}cancel`, { method: 'POST', body: JSON.stringify({ weight_version: 'step-3' }), headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(202);
      return ((await res.json()) as { cancelled: string[] }).cancelled;
    };
    try {
      // One is taken, the other refused at the bound; the step's straggler is cut, then the other comes in again.
      await waitFor('one pending and one refused', async () => { const c = await pending.counts(runId); return c.pending === 1 && c.refused.max_pending >= 1 && (await jobs()) === 1; }, 30_000, 50);
      const first = await cancelStep();
      expect(first).toHaveLength(1);
      await waitFor('the other taken after Retry-After', async () => (await pending.entries(runId)).some((e) => !first.includes(e.ngRolloutId)) && (await jobs()) === 1, 30_000, 100);
      expect(await cancelStep()).toHaveLength(1);
      expect(await exited, err).toBe(0);
    } finally {
      child.kill();
      await rollouts.close();
    }
    expect(out.trim().split('\n').sort()).toEqual(['step-3-0-0 0 True step-3 1', 'step-3-1-0 0 True step-3 1']);
  }, 90_000);
});
