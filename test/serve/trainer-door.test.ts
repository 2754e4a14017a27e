/**
 * `vcfleet serve` as a trainer drives it for days (fast: no OpenCode; the real results consumer in
 * this process, real Redis, a prefix of its own): a repeated `_ng_rollout_id` with another weight
 * version is refused (409 naming both), `serve.require_weight_version` refuses a row without one;
 * with credentials set every route needs them on loopback too, and `/health` says only that it is
 * alive; the 65th pending request with `serve.max_pending=64` gets 429 with Retry-After and is taken
 * once one finishes, an image budget refuses too, and `vcfleet status` and Prometheus count both;
 * `POST /cancel` of a step's weight version cancels its stragglers (rows `cancelled`, judge jobs gone).
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/shared/config/load.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { enqueue, openQueue } from '../../src/shared/queue/registry.ts';
import { cancelledByVersionError, CANCELLED_ERROR } from '../../src/shared/records/request-task.ts';
import { RolloutOutcomeSchema } from '../../src/shared/records/rollout-outcome.ts';
import { RunStore } from '../../src/shared/stores/run-store.ts';
import { ServePending } from '../../src/shared/stores/serve-pending.ts';
import { createServiceRun } from '../../src/producer/produce.ts';
import { RolloutService } from '../../src/serve/rollout-service.ts';
import { buildServeApp } from '../../src/serve/server.ts';
import { runStatus } from '../../src/ops/run-status.ts';
import { createFleetMetrics } from '../../src/ops/prom-metrics.ts';
import { startResultsWorker, type ResultsWorker } from '../../src/workers/results/worker.ts';
import { REDIS_URL, runCli } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { waitFor } from '../helpers/wait.ts';
import { gymRow, pngUrl } from '../helpers/serve.ts';

const TOKEN = 'serve-token-TRAINER-36';
const prefix = `vcftest-serve-${randomBytes(4).toString('hex')}`;
const logger = createLogger({ level: 'silent' });
type Json = Record<string, any>;

describe('vcfleet serve for a trainer: fresh, private, bounded, cancellable by step', () => {
  let redis: Redis;
  let dir: string;
  const services: RolloutService[] = [];
  const results: ResultsWorker[] = [];
  const queues: Array<{ close(): Promise<void> }> = [];
  // Every POST /run here waits for its rollout; they are let go at the end.
  const clients = new AbortController();

  const configOf = (runId: string, extra: string[] = []): Config =>
    loadConfig({ overrides: [`++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`, `++run_id=${runId}`, `++output_jsonl_fpath=${path.join(dir, `${runId}.jsonl`)}`, ...extra], env: {} });

  /** A service of its own run, its app, and (when asked) a results consumer of the run's queues. */
  async function serviceOf(runId: string, extra: string[] = [], withResults = false) {
    const config = configOf(runId, extra);
    const { run } = await createServiceRun({ config, redis, logger });
    const service = new RolloutService({ config, redis, run, logger });
    services.push(service);
    if (withResults) {
      const r = startResultsWorker({ config, connection: redis, logger, scope: run.queue_scope });
      results.push(r);
      await r.ready;
    }
    const app = buildServeApp({ config, logger, service });
    const queue = openQueue('rollout', redis, prefix, { scope: run.queue_scope });
    queues.push(queue);
    /** `n` requests pending, each with its record and job (a request takes its place first, then keeps them). */
    const accepted = (n: number, what = `${n} request(s) accepted`) =>
      waitFor(what, async () => (await pendingOf(run.run_id)).pending === n && (await queue.count()) === n, 30_000, 20);
    const post = async (body: unknown, headers: Record<string, string> = {}) =>
      app.request('/run', { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers }, signal: clients.signal });
    return { config, run, service, app, post, accepted };
  }
  const pendingOf = (runId: string) => new ServePending(redis, prefix).counts(runId);
  const error = async (res: Response) => ((await res.json()) as { error: string }).error;

  beforeAll(() => {
    redis = createRedis(REDIS_URL, 'worker');
    dir = createTmpDir('vcfleet-serve-trainer-');
  });
  afterAll(async () => {
    clients.abort();
    for (const r of results) await r.close(1000);
    for (const s of services) await s.close();
    for (const q of queues) await q.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
    removeTmpDirs();
  });

  it('refuses a repeated _ng_rollout_id with another weight version (409 naming both), and a row without one when serve.require_weight_version', async () => {
    const { post, run, accepted } = await serviceOf('trainer-fresh');
    const row = (version?: string) => gymRow('Which one? fresh', 'A', { _ng_rollout_id: 'task0-r0', ...(version ? { policy: { weight_version: version } } : {}) });
    void post(row('step-1')).catch(() => undefined);
    await accepted(1);
    const next = await post(row('step-2'));
    expect(next.status).toBe(409);
    const text = await error(next);
    expect(text).toMatch(/_ng_rollout_id "task0-r0" was accepted with weight_version "step-1"; this request has weight_version "step-2"/);
    expect(text).toMatch(/Put the training step in _ng_rollout_id/);
    const none = await post(row());
    expect(none.status).toBe(409);
    expect(await error(none)).toMatch(/this request has no weight_version/);
    expect((await pendingOf(run.run_id)).pending).toBe(1);

    const strict = await serviceOf('trainer-strict', ['++serve.require_weight_version=true']);
    const missing = await strict.post(gymRow('q', 'A', { _ng_rollout_id: 'x-0' }));
    expect(missing.status).toBe(400);
    expect(await error(missing)).toMatch(/policy\.weight_version is missing: this service requires it \(serve\.require_weight_version\)/);
  });

  it('with credentials set, every route needs them on loopback too (401); /health tells only liveness', async () => {
    const open = await serviceOf('trainer-private');
    const guarded = buildServeApp({ config: configOf('trainer-private', [`++dashboard.token=${TOKEN}`]), logger, service: open.service });
    const auth = { authorization: `Bearer ${TOKEN}` };
    const asks: Array<[string, RequestInit]> = [
      ['/rollouts/some-id?wait=0', {}],
      ['/rollouts/some-id', { method: 'DELETE' }],
      ['/cancel', { method: 'POST', body: JSON.stringify({ ids: ['some-id'] }), headers: { 'content-type': 'application/json' } }],
      ['/run', { method: 'POST', body: JSON.stringify(gymRow('q', 'A', {}, [])), headers: { 'content-type': 'application/json' } }],
    ];
    for (const [url, init] of asks) {
      expect((await guarded.request(url, init)).status, url).toBe(401);
      expect((await guarded.request(url, { ...init, headers: { ...(init.headers as Record<string, string>), authorization: 'Bearer wrong' } })).status, url).toBe(401);
    }
    // With the token each reaches its handler: unknown id (404), a bad row (400), nothing to cancel (202).
    expect((await guarded.request('/rollouts/some-id?wait=0', { headers: auth })).status).toBe(404);
    expect((await guarded.request('/rollouts/some-id', { method: 'DELETE', headers: auth })).status).toBe(404);
    expect((await guarded.request('/run', { ...asks[3][1], headers: { 'content-type': 'application/json', ...auth } })).status).toBe(400);
    const cancel = await guarded.request('/cancel', { ...asks[2][1], headers: { 'content-type': 'application/json', ...auth } });
    expect(cancel.status).toBe(202);
    expect(await cancel.json()).toEqual({ cancelled: [], done: [], unknown: ['some-id'] });
    for (const app of [guarded, open.app]) {
      const health = await app.request('/health');
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ ok: true });
    }
    // Without credentials (loopback only) the routes are open to local users.
    expect((await open.app.request('/rollouts/some-id?wait=0')).status).toBe(404);
  });

  it('the 65th pending request with max_pending=64 gets 429 with Retry-After, and is taken once one finishes; status and Prometheus count it', async () => {
    const { post, app, run, accepted } = await serviceOf('trainer-bound', ['++serve.max_pending=64'], true);
    const row = (i: number) => gymRow(`Puzzle ${i}?`, 'A', { _ng_rollout_id: `b-${i}`, policy: { weight_version: 'step-1' } });
    for (let i = 0; i < 64; i++) void post(row(i)).catch(() => undefined);
    await accepted(64);
    const refused = await post(row(64));
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(await error(refused)).toMatch(/64 requests pending, its bound \(serve\.max_pending 64\)/);
    // One already accepted, asked again, is not refused: it is the same rollout.
    expect((await app.request('/rollouts/b-3?wait=0')).status).toBe(202);
    const status = await runStatus(redis, prefix, run.run_id);
    expect(status.serve).toMatchObject({ pending: 64, refused: { max_pending: 1, image_budget: 0 } });
    expect(status.serve!.image_bytes).toBeGreaterThan(0);
    const cli = await runCli(['status', '--run-id', run.run_id, `++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`]);
    expect(cli.stdout, cli.output).toMatch(/^serve: 64 request\(s\) pending \([\d.]+ MiB of images\); refused 1 at serve\.max_pending, 0 at serve\.max_pending_image_mib$/m);
    const metrics = createFleetMetrics();
    metrics.watchQueues(redis, prefix);
    const text = await metrics.registry.metrics();
    await metrics.close();
    expect(text).toContain(`vcfleet_serve_pending{run_id="${run.run_id}"} 64`);
    expect(text).toContain(`vcfleet_serve_refused_total{run_id="${run.run_id}",reason="max_pending"} 1`);

    // One finishes (its client cancels it): its response is left, and it stops counting.
    const answer = post(row(0)); // asked again: waits for the same rollout
    expect((await app.request('/rollouts/b-0', { method: 'DELETE' })).status).toBe(202);
    const done = await answer;
    expect(done.status).toBe(200);
    expect(await done.json()).toMatchObject({ _ng_rollout_id: 'b-0', _ng_failure_terminal: true, failure_detail: CANCELLED_ERROR, weight_version: 'step-1' });
    await accepted(63);
    void post(row(64)).catch(() => undefined);
    await accepted(64, 'the 65th accepted');
    expect((await app.request('/rollouts/b-64?wait=0')).status).toBe(202);
  }, 120_000);

  it("lets go of stale places (a serve that died mid-accept; a response left by a results consumer older than the bound), so the bound does not shrink for good", async () => {
    const { post, run } = await serviceOf('trainer-stale', ['++serve.max_pending=2']);
    const keys = new ServePending(redis, prefix).keys;
    const place = async (id: string) => {
      await redis.hset(keys.servePending(run.run_id), `${run.run_id}-ng-${id}`, JSON.stringify({ b: 100, w: null, id, t: Date.now() - 120_000 }));
      await redis.incrby(keys.servePendingBytes(run.run_id), 100);
    };
    // What a serve killed between taking the place and keeping the record leaves behind.
    await place('lost-0');
    // A finished one whose response was left without letting its place go.
    await place('done-0');
    await redis.set(keys.requestTask(run.run_id, `${run.run_id}-ng-done-0`), 'record');
    await redis.set(keys.requestResponse(run.run_id, `${run.run_id}-ng-done-0`), 'response');
    void post(gymRow('q', 'A', { _ng_rollout_id: 'new-0' })).catch(() => undefined);
    await waitFor('the new one taken in their place', async () => (await new ServePending(redis, prefix).entries(run.run_id)).map((e) => e.ngRolloutId).join() === 'new-0', 10_000, 20);
    expect((await pendingOf(run.run_id)).image_bytes).toBeLessThan(1000);
  });

  it('refuses past the image budget of the pending requests (429), a request over the whole budget with 413', async () => {
    const { post, run, accepted } = await serviceOf('trainer-bytes', ['++serve.max_pending_image_mib=1']);
    const big = (seed: number, kib: number) => `data:image/png;base64,${Buffer.concat([Buffer.from(pngUrl(seed).split(',')[1], 'base64'), Buffer.alloc(kib * 1024)]).toString('base64')}`;
    void post(gymRow('big one', 'A', { _ng_rollout_id: 'big-0' }, [big(1, 600)])).catch(() => undefined);
    await accepted(1);
    const second = await post(gymRow('big two', 'A', { _ng_rollout_id: 'big-1' }, [big(2, 600)]));
    expect(second.status).toBe(429);
    expect(await error(second)).toMatch(/would pass the budget of 1 MiB \(serve\.max_pending_image_mib\)/);
    const huge = await post(gymRow('huge', 'A', { _ng_rollout_id: 'big-2' }, [big(3, 1100)]));
    expect(huge.status).toBe(413);
    expect((await pendingOf(run.run_id)).refused.image_budget).toBe(1);
  });

  it("POST /cancel of a step's weight version cancels its stragglers: rows cancelled, judge jobs gone, the next step's kept", async () => {
    const { post, app, run, accepted } = await serviceOf('trainer-cancel', [], true);
    const rollouts = openQueue('rollout', redis, prefix, { scope: run.queue_scope });
    const judge = openQueue('judge', redis, prefix, { scope: run.queue_scope });
    const row = (id: string, version: string) => gymRow(`Which? ${id}`, 'A', { _ng_rollout_id: id, policy: { weight_version: version } });
    const answers = ['s7-0', 's7-1', 's7-2', 's7-3'].map((id) => post(row(id, 'step-7')));
    void post(row('s8-0', 'step-8')).catch(() => undefined);
    await accepted(5);
    // Two of step 7 finished their sessions: their jobs moved on to the judge, as a sandbox-worker hands them over.
    const fleetId = (id: string) => `${run.run_id}-ng-${id}`;
    for (const id of ['s7-0', 's7-1']) {
      const job = (await rollouts.getJob(fleetId(id)))!;
      await job.remove();
      await enqueue('judge', judge, { v: 1, run_id: run.run_id, task_id: job.data.task_id, repeat: 0, rollout_id: fleetId(id), outcome: RolloutOutcomeSchema.parse({ stop_reason: 'answered', extracted_answer: 'A', response_tail: 'So it is \\boxed{A}', turns: 3 }), task_source: 'request' });
    }
    expect(await judge.count()).toBe(2);

    const res = await app.request('/cancel', { method: 'POST', body: JSON.stringify({ weight_version: 'step-7' }), headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(202);
    expect(((await res.json()) as Json).cancelled.sort()).toEqual(['s7-0', 's7-1', 's7-2', 's7-3']);
    expect(await judge.getJobs(['waiting', 'delayed', 'prioritized', 'active'])).toEqual([]);
    const store = new RunStore(redis, prefix);
    for (const id of ['s7-0', 's7-1', 's7-2', 's7-3']) {
      const r = await waitFor(`the row of ${id}`, () => store.getRow(run.run_id, fleetId(id)).then((x) => x ?? undefined), 10_000, 50);
      expect(r).toMatchObject({ failure_kind: 'infra_failed', error: cancelledByVersionError('step-7'), reward: null, judge_verdict: null, weight_version: 'step-7' });
      expect(r!.error).toBe('cancelled with the pending rollouts of weight version "step-7" (POST /cancel {"weight_version": …}): not scored');
      // The judged ones keep what their session did; they were never graded.
      if (id === 's7-0') expect(r).toMatchObject({ turns: 3, stop_reason: 'answered', extracted_answer: 'A', judge_model: null });
    }
    for (const a of answers) expect(await (await a).json()).toMatchObject({ mask_sample: true, _ng_failure_terminal: true, weight_version: 'step-7' });
    // status: one paper table per weight version; the cancelled rollouts left out of it, counted apart.
    const cancelledRow = (await store.getRow(run.run_id, fleetId('s7-2')))!;
    const graded = (id: string, version: string, reward: 0 | 1) => ({ ...cancelledRow, rollout_id: id, weight_version: version, reward, failure_kind: null, error: null, judge_verdict: reward ? 'equivalent' as const : 'different' as const });
    await store.putRow(graded(`${run.run_id}-x1`, 'step-6', 1));
    await store.putRow(graded(`${run.run_id}-x2`, 'step-7', 1));
    const versions = (await runStatus(redis, prefix, run.run_id)).by_weight_version!;
    expect(versions.map((v) => [v.weight_version, v.cancelled, v.paper.rollouts, v.paper.overall.mean])).toEqual([['step-6', 0, 1, 1], ['step-7', 4, 1, 1]]);
    const shown = await runCli(['status', '--run-id', run.run_id, `++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`]);
    expect(shown.stdout, shown.output).toMatch(/^weight version step-7 \(1 pass, every rollout counted; 4 cancelled, left out\) +100\.0 ± 0\.0$/m);
    expect(shown.stdout).toMatch(/^weight version step-6 \(1 pass, every rollout counted\) +100\.0 ± 0\.0$/m);
    expect((await pendingOf(run.run_id)).pending).toBe(1);
    expect((await app.request('/rollouts/s8-0?wait=0')).status).toBe(202);

    const byId = await app.request('/cancel', { method: 'POST', body: JSON.stringify({ ids: ['s8-0', 's7-0', 'nobody'] }), headers: { 'content-type': 'application/json' } });
    expect(await byId.json()).toEqual({ cancelled: ['s8-0'], done: ['s7-0'], unknown: ['nobody'] });
    const bad = await app.request('/cancel', { method: 'POST', body: JSON.stringify({ step: 7 }), headers: { 'content-type': 'application/json' } });
    expect(bad.status).toBe(400);
    expect(await error(bad)).toMatch(/POST \/cancel takes \{"ids"/);
    await Promise.all([rollouts.close(), judge.close()]);
  }, 60_000);
});
