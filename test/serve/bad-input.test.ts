/**
 * `vcfleet serve`'s door without any worker (fast: no OpenCode): every kind of bad input is refused
 * naming its field (400) or its bound (413), a request beyond loopback needs the dashboard's token
 * (401), and nothing half-made is left in Redis. A good request is accepted once per rollout id, is
 * pending (202 with `?wait=0`), and a cancelled one that never started leaves its masked row for the
 * results consumer. Real Redis, a prefix of its own.
 */
import { randomBytes } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/shared/config/load.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { CANCELLED_ERROR } from '../../src/shared/records/request-task.ts';
import { createServiceRun } from '../../src/producer/produce.ts';
import { RolloutService } from '../../src/serve/rollout-service.ts';
import { buildServeApp } from '../../src/serve/server.ts';
import { REDIS_URL, runCli } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';
import { gymRow, jpegUrl, pngUrl, webpUrl } from '../helpers/serve.ts';

const TOKEN = 'serve-token-BADINPUT-77';
const prefix = `vcftest-serve-${randomBytes(4).toString('hex')}`;
const logger = createLogger({ level: 'silent' });
const configOf = (extra: string[] = []): Config =>
  loadConfig({
    overrides: [`++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`, '++serve.max_request_mib=2', '++serve.max_image_mib=1', '++serve.max_images=2', '++run_id=serve-bad-input', ...extra],
    env: {},
  });

describe('vcfleet serve: bad input, pending, cancel before start', () => {
  let redis: Redis;
  let service: RolloutService;
  let app: ReturnType<typeof buildServeApp>;
  beforeAll(async () => {
    redis = createRedis(REDIS_URL, 'worker');
    const config = configOf();
    const { run } = await createServiceRun({ config, redis, logger });
    service = new RolloutService({ config, redis, run, logger });
    app = buildServeApp({ config, logger, service });
  });
  afterAll(async () => {
    await service.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  const post = (body: unknown, headers: Record<string, string> = {}) =>
    app.request('/run', { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });
  const error = async (res: Response) => ((await res.json()) as { error: string }).error;

  it('refuses each kind of bad input with 400 naming the field, or 413 naming the bound', async () => {
    const cases: Array<[unknown, number, RegExp]> = [
      ['{not json', 400, /not JSON/],
      [[1, 2], 400, /JSON object/],
      [gymRow('q', 'A', {}, []), 400, /content has no input_image part/],
      [gymRow('q', 'A', {}, ['data:image/gif;base64,R0lGODlhAQABAAAAACw=']), 400, /content\[0\]\.image_url: the image is not PNG, JPEG or WebP/],
      [gymRow('q', 'A', {}, [`data:image/png;base64,${Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>').toString('base64')}`]), 400, /not PNG, JPEG or WebP/],
      [gymRow('q', 'A', {}, [jpegUrl('x').replace('image/jpeg', 'image/png')]), 400, /says image\/png but its bytes are image\/jpeg/],
      [gymRow('q', 'A', {}, ['https://example.com/puzzle.png']), 400, /must be a data: URL/],
      [gymRow('q', 'A', {}, ['data:image/png;base64,@@@@']), 400, /not base64/],
      [(() => { const r = gymRow('q', 'A'); delete r.expected_answer; return r; })(), 400, /expected_answer is missing/],
      [(() => { const r = gymRow('q', 'A'); delete r.question; return r; })(), 400, /question is missing/],
      [gymRow('q', 'A', { responses_create_params: { input: (gymRow('q', 'A').responses_create_params as { input: unknown }).input, reward_model: 'x' } }), 400, /unknown field\(s\) "reward_model" in responses_create_params/],
      [gymRow('q', 'A', { policy: { model: 'm', api_key: 'k' } }), 400, /unknown field\(s\) "api_key" in policy/],
      [gymRow('q', 'A', { policy: { base_url: 'http://evil.example/v1' } }), 400, /policy\.base_url http:\/\/evil\.example\/v1 is not an endpoint the workers send their key to/],
      [gymRow('q', 'A', { responses_create_params: { input: [], temperature: 1 } }), 400, /input must be one user message/],
      [gymRow('q', 'A', { ans_type: 'essay' }), 400, /ans_type/],
      [gymRow('q', 'A', {}, [pngUrl(1), pngUrl(2), pngUrl(3)]), 413, /3 input_image parts, over the bound of 2 \(serve\.max_images\)/],
      [gymRow('q', 'A', {}, [`data:image/png;base64,${Buffer.concat([Buffer.from(pngUrl(1).split(',')[1], 'base64'), Buffer.alloc(1100 * 1024)]).toString('base64')}`]), 413, /over the 1 MiB bound of one image \(serve\.max_image_mib\)/],
      [gymRow('x'.repeat(2_300_000), 'A'), 413, /the body is over 2 MiB \(serve\.max_request_mib\)/],
    ];
    for (const [body, status, message] of cases) {
      const res = await post(body);
      expect(res.status, JSON.stringify(body).slice(0, 200)).toBe(status);
      expect(await error(res)).toMatch(message);
    }
    const text = gymRow('q', 'A');
    (text.responses_create_params as { input: Array<{ content: unknown[] }> }).input[0].content.push({ type: 'input_text', text: 'again' });
    expect(await error(await post(text))).toMatch(/must have one input_text part \(the prompt\), not 2/);
  });

  it('needs the dashboard token beyond loopback (401), compared as the dashboard compares it', async () => {
    const config = configOf(['++serve.host=0.0.0.0', `++dashboard.token=${TOKEN}`]);
    const guarded = buildServeApp({ config, logger, service });
    const bad = gymRow('q', 'A', {}, []);
    const req = (headers: Record<string, string>) => guarded.request('/run', { method: 'POST', body: JSON.stringify(bad), headers: { 'content-type': 'application/json', ...headers } });
    const refused = await req({});
    expect(refused.status).toBe(401);
    // JSON like every other error of serve, the challenge header kept.
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await refused.json()) as { error: string }).error).toMatch(/^unauthorized: send the credentials/);
    expect(refused.headers.get('www-authenticate')).toBeTruthy();
    expect((await req({ authorization: 'Bearer wrong-token' })).status).toBe(401);
    expect((await guarded.request('/rollouts/x?wait=0')).status).toBe(401);
    // With the token the request reaches the check of its body.
    expect((await req({ authorization: `Bearer ${TOKEN}` })).status).toBe(400);
  });

  it('refuses to start beyond loopback without credentials (exit 2), before Redis or any port', async () => {
    const refused = await runCli(['serve', '--host', '0.0.0.0', '++redis_url=redis://127.0.0.1:1']);
    expect(refused.code).toBe(2);
    expect(refused.output).toMatch(/refusing to serve rollouts on 0\.0\.0\.0 without credentials: set VCFLEET_DASHBOARD_TOKEN/);
  }, 60_000);

  it('left nothing half-made in Redis: no request record, no job, no rollout counted', async () => {
    const keys = await redis.keys(`${prefix}:*`);
    expect(keys.filter((k) => /:request:|:response:|:cancel:|:enqueued/.test(k))).toEqual([]);
    const rollouts = openQueue('rollout', redis, prefix, { scope: service.runId });
    expect(Object.values(await rollouts.getJobCounts()).reduce((a, b) => a + b, 0)).toBe(0);
    await rollouts.close();
  });

  it('a client waiting on a pending rollout keeps one abort listener however long it waits (no MaxListenersExceededWarning)', async () => {
    const body = gymRow('Which way? serve-listeners', 'B', { _ng_rollout_id: 'listeners-1', _ng_task_index: 4 });
    const posted = post(body);
    const rolloutId = `${service.runId}-ng-listeners-1`;
    const rollouts = openQueue('rollout', redis, prefix, { scope: service.runId });
    for (let i = 0; i < 50 && !(await rollouts.getJob(rolloutId)); i++) await new Promise((r) => setTimeout(r, 50));
    const client = new AbortController();
    const waiting = service.wait('listeners-1', client.signal);
    // Three polls of the rollout's state (2 s each) while it stays pending.
    await new Promise((r) => setTimeout(r, 6500));
    expect(getEventListeners(client.signal, 'abort').length).toBeLessThanOrEqual(1);
    client.abort();
    expect((await waiting)?.state).toBe('pending');
    expect(getEventListeners(client.signal, 'abort')).toHaveLength(0);
    // Cancelled (no worker here): its POST waits for the results consumer, as the pending test's does.
    expect((await app.request('/rollouts/listeners-1', { method: 'DELETE' })).status).toBe(202);
    void posted;
    await rollouts.close();
  }, 30_000);

  it('accepts a row once per _ng_rollout_id (WebP and JPEG images too), answers 202 with ?wait=0, 409 for another row under the same id, 404 for an unknown id', async () => {
    const body = gymRow('Which way? serve-pending', 'B', { _ng_rollout_id: 'pending-1', _ng_task_index: 3, _ng_rollout_index: 1, category: 'Visual Tracking' }, [webpUrl(), jpegUrl('y')]);
    const first = post(body);
    // POST /run waits for the rollout (no worker here): ask for it from another client meanwhile.
    const rolloutId = `${service.runId}-ng-pending-1`;
    const rollouts = openQueue('rollout', redis, prefix, { scope: service.runId });
    for (let i = 0; i < 50 && !(await rollouts.getJob(rolloutId)); i++) await new Promise((r) => setTimeout(r, 50));
    const job = await rollouts.getJob(rolloutId);
    expect(job?.data).toMatchObject({ task_source: 'request', repeat: 1, task_id: 'task-3' });
    const pending = await app.request('/rollouts/pending-1?wait=0');
    expect(pending.status).toBe(202);
    expect(await pending.json()).toMatchObject({ status: 'pending', _ng_rollout_id: 'pending-1', rollout_id: rolloutId });
    const again = post(body);
    const other = await post({ ...body, expected_answer: 'C' });
    expect(other.status).toBe(409);
    expect(await error(other)).toMatch(/accepted before with another row/);
    expect((await app.request('/rollouts/nobody?wait=0')).status).toBe(404);
    expect((await app.request('/rollouts/nobody', { method: 'DELETE' })).status).toBe(404);
    expect(await rollouts.count()).toBe(1);

    // Cancelled before any worker took it: taken out of the queue, its masked row made by serve for the results consumer.
    const cancel = await app.request('/rollouts/pending-1', { method: 'DELETE' });
    expect(cancel.status).toBe(202);
    expect(await rollouts.getJob(rolloutId)).toBeUndefined();
    const results = openQueue('results', redis, prefix, { scope: service.runId });
    const [rowJob] = await results.getJobs(['waiting']);
    expect(rowJob.data.row).toMatchObject({ rollout_id: rolloutId, failure_kind: 'infra_failed', error: CANCELLED_ERROR, reward: null, type: 'Visual Tracking', repeat: 1 });
    await Promise.all([rollouts.close(), results.close()]);
    // The waiting POSTs are still waiting (no results consumer here): leave them.
    void first;
    void again;
  });
});
