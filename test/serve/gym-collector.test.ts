/**
 * `vcfleet serve` as NeMo Gym's rollout collector and NeMo RL reach it, over real HTTP (a real serve
 * server, the real results consumer, real Redis; no sandbox worker: a rollout is finished by its
 * client's cancel, which gives a masked row): a row carrying every field they add is accepted and
 * its response echoes them, with the mask where both readers look; malformed parts are still refused
 * naming the field; `POST /aggregate_metrics` answers NeMo Gym's shape; `serve.allow_from` lets the
 * listed addresses in without credentials while everyone else still needs them.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/shared/config/load.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { createServiceRun } from '../../src/producer/produce.ts';
import { RolloutService } from '../../src/serve/rollout-service.ts';
import { startServeServer, type ServeServer } from '../../src/serve/server.ts';
import { startResultsWorker, type ResultsWorker } from '../../src/workers/results/worker.ts';
import { REDIS_URL } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { waitFor } from '../helpers/wait.ts';
import { gymRow } from '../helpers/serve.ts';

const TOKEN = 'serve-token-GYMCOLLECTOR-42';
const prefix = `vcftest-serve-${randomBytes(4).toString('hex')}`;
const logger = createLogger({ level: 'silent' });
type Json = Record<string, any>;

/** One request on a connection of its own (none kept alive: the leak guard counts sockets). */
function call(url: string, method: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: Json }> {
  return new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const req = http.request(url, { method, agent: false, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (data += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: /json/.test(String(res.headers['content-type'])) ? (JSON.parse(data) as Json) : { text: data } }));
    });
    req.on('error', reject);
    req.end(text);
  });
}

describe('vcfleet serve for NeMo Gym and NeMo RL, over HTTP', () => {
  let redis: Redis;
  let dir: string;
  const servers: ServeServer[] = [];
  const services: RolloutService[] = [];
  let results: ResultsWorker;
  let url: string;

  const configOf = (runId: string, extra: string[] = []): Config =>
    loadConfig({ overrides: [`++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`, `++run_id=${runId}`, `++output_jsonl_fpath=${path.join(dir, `${runId}.jsonl`)}`, '++serve.port=0', ...extra], env: {} });

  async function serve(runId: string, extra: string[] = []): Promise<{ url: string; config: Config }> {
    const config = configOf(runId, extra);
    const { run } = await createServiceRun({ config, redis, logger });
    const service = new RolloutService({ config, redis, run, logger });
    services.push(service);
    const server = await startServeServer({ config, logger, service });
    servers.push(server);
    return { url: server.url, config };
  }

  beforeAll(async () => {
    redis = createRedis(REDIS_URL, 'worker');
    dir = createTmpDir('vcfleet-gym-collector-');
    const first = await serve('gym-collector');
    url = first.url;
    results = startResultsWorker({ config: first.config, connection: redis, logger, scope: 'gym-collector' });
    await results.ready;
  });
  afterAll(async () => {
    for (const s of servers) await s.close();
    await results?.close(1000);
    for (const s of services) await s.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
    removeTmpDirs();
  });

  it("accepts a row with every field Gym's collector and NeMo RL add, and echoes them; the masked response says so at mask_sample and instance_config.mask_sample", async () => {
    const params = (gymRow('q', 'A').responses_create_params as Json);
    const row = gymRow('Which way? gym-fields', 'B', {
      responses_create_params: { ...params, temperature: 1, metadata: { num_repeats_add_seed: 'true', seed: '3' } },
      agent_ref: { name: 'babyvision_opencode' },
      _ng_task_index: 3,
      _ng_rollout_index: 1,
      _ng_attempt_index: 2,
      _rowidx: 7,
      _ng_future_field: { any: ['json'] },
      instance_config: { env: 'babyvision' },
      // A row's field of the same name as one of the response's never overwrites it.
      reward: 5,
      _ng_rollout_id: 'gym-fields-1',
    });
    const answer = call(`${url}run`, 'POST', row);
    await waitFor('the rollout accepted', async () => (await call(`${url}rollouts/gym-fields-1?wait=0`, 'GET')).status === 202, 10_000, 20);
    expect((await call(`${url}rollouts/gym-fields-1`, 'DELETE')).status).toBe(202);
    const res = await answer;
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      agent_ref: { name: 'babyvision_opencode' },
      _ng_task_index: 3,
      _ng_rollout_index: 1,
      _ng_attempt_index: 2,
      _rowidx: 7,
      _ng_future_field: { any: ['json'] },
      _ng_rollout_id: 'gym-fields-1',
      reward: 0,
      mask_sample: true,
      _ng_failure_class: 'infra_failed',
      instance_config: { env: 'babyvision', mask_sample: true },
      turns_used: 0,
      finished_naturally: false,
    });
    expect(res.json.responses_create_params.metadata).toEqual({ num_repeats_add_seed: 'true', seed: '3' });
  });

  it('still refuses malformed fields with 400 naming them', async () => {
    const params = (gymRow('q', 'A').responses_create_params as Json);
    const withPart = (part: Json) => gymRow('q', 'A', { responses_create_params: { input: [{ ...params.input[0], content: [...params.input[0].content, part] }] } });
    const cases: Array<[unknown, RegExp]> = [
      [gymRow('q', 'A', { agent_ref: 'babyvision' }), /^agent_ref: /],
      [gymRow('q', 'A', { agent_ref: {} }), /^agent_ref\.name is missing/],
      [gymRow('q', 'A', { _rowidx: -1 }), /^_rowidx: /],
      [gymRow('q', 'A', { _ng_attempt_index: 'two' }), /^_ng_attempt_index: /],
      [gymRow('q', 'A', { responses_create_params: { ...params, metadata: { seed: 3 } } }), /^responses_create_params\.metadata\.seed: /],
      [gymRow('q', 'A', { responses_create_params: { ...params, tools: [] } }), /unknown field\(s\) "tools" in responses_create_params/],
      [withPart({ type: 'input_audio', data: 'x' }), /responses_create_params\.input\[0\]\.content\[2\]\.type/],
    ];
    for (const [body, message] of cases) {
      const res = await call(`${url}run`, 'POST', body);
      expect(res.status, JSON.stringify(body).slice(0, 300)).toBe(400);
      expect(res.json.error).toMatch(message);
    }
  });

  it("POST /aggregate_metrics answers NeMo Gym's shape over the unmasked rows, for its body and for a bare list", async () => {
    const rows = [
      { agent_ref: { name: 'a' }, _ng_task_index: 0, _ng_rollout_index: 0, reward: 1, turns_used: 2, finished_naturally: true, mask_sample: false },
      { agent_ref: { name: 'a' }, _ng_task_index: 0, _ng_rollout_index: 1, reward: 0, turns_used: 4, finished_naturally: false, mask_sample: false },
      { agent_ref: { name: 'a' }, _ng_task_index: 1, _ng_rollout_index: 0, reward: 0, turns_used: 9, mask_sample: true, _ng_failure_class: 'judge_failed' },
    ];
    for (const body of [{ verify_responses: rows }, rows]) {
      const res = await call(`${url}aggregate_metrics`, 'POST', body);
      expect(res.status).toBe(200);
      // Gym's AggregateMetrics: one object, which its collector wraps with the agent's agent_ref.
      expect(res.json).toEqual({
        agent_metrics: expect.objectContaining({ 'mean/reward': 0.5, 'max/reward': 1, 'min/reward': 0, 'median/reward': 0.5, 'std/reward': Math.SQRT1_2, 'mean/turns_used': 3, 'mean/finished_naturally': 0.5 }),
        key_metrics: expect.objectContaining({ 'mean/reward': 0.5, 'mean/turns_used': 3 }),
        group_level_metrics: [expect.objectContaining({ _ng_task_index: 0, num_rollouts: 2, 'mean/reward': 0.5 })],
      });
      expect(Object.keys(res.json.agent_metrics).filter((k) => k.includes('_ng_'))).toEqual([]);
    }
    for (const [body, message] of [['{nope', /not JSON/], [{ rows: [], more: [] }, /several lists \(rows, more\)/], [[1], /row \[0\] .* is not a JSON object/]] as const) {
      const res = await call(`${url}aggregate_metrics`, 'POST', body);
      expect(res.status).toBe(400);
      expect(res.json.error).toMatch(message);
    }
  });

  it('serve.allow_from lets a listed peer in without credentials; any other peer still needs the token', async () => {
    const rows = { verify_responses: [{ reward: 1 }] };
    const listed = await serve('gym-allow-listed', [`++dashboard.token=${TOKEN}`, '++serve.allow_from=[127.0.0.0/8]']);
    expect((await call(`${listed.url}aggregate_metrics`, 'POST', rows)).status).toBe(200);
    const other = await serve('gym-allow-other', [`++dashboard.token=${TOKEN}`, '++serve.allow_from=[10.0.0.0/8, "fd00::/8"]']);
    expect((await call(`${other.url}aggregate_metrics`, 'POST', rows)).status).toBe(401);
    expect((await call(`${other.url}run`, 'POST', gymRow('q', 'A', {}, []))).status).toBe(401);
    expect((await call(`${other.url}aggregate_metrics`, 'POST', rows, { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
    // Bound beyond loopback with a list and no credentials: only the listed get in; a forwarded header is not believed.
    const open = await serve('gym-allow-open', ['++serve.host=0.0.0.0', '++serve.allow_from=[127.0.0.2]']);
    const local = open.url.replace('0.0.0.0', '127.0.0.1');
    const refused = await call(`${local}aggregate_metrics`, 'POST', rows, { 'x-forwarded-for': '127.0.0.2' });
    expect(refused.status).toBe(403);
    expect(await new Promise((resolve) => http.get(`${local}health`, { agent: false }, (r) => { r.resume(); resolve(r.statusCode); }))).toBe(200);
    for (const bad of ['not-an-address', '10.0.0.0/33', '10.0.0.0/8/1']) {
      await expect(serve(`gym-allow-bad-${bad.length}`, [`++serve.allow_from=[${bad}]`])).rejects.toThrow(new RegExp(`serve\\.allow_from: "${bad.replace(/[./]/g, '\\$&')}" is not an IP address or a CIDR block`));
    }
  });
});
