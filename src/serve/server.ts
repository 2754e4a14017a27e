/**
 * `vcfleet serve`'s HTTP API (one Hono app on `serve.{host,port}`), the door NeMo Gym's agent servers
 * have:
 * - `POST /run`: one dataset row; answers with the rollout's verify-response row once it is done;
 * - `GET /rollouts/{id}`: the same by `_ng_rollout_id` (waits; `?wait=0`: 202 at once while it runs);
 * - `DELETE /rollouts/{id}`: cancel it (202; its row says so and is not scored);
 * - `GET /health`: the run served.
 * Every request passes the dashboard's access guard first (http/access.ts): beyond loopback every
 * request needs the dashboard's credentials (401 without).
 */
import { createAdaptorServer } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Config } from '../shared/config.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { accessGuard, accessPolicy } from '../http/access.ts';
import { listen } from '../http/listen.ts';
import { parseRunBody, RequestRefused, type RequestBounds } from './gym-request.ts';
import type { RolloutService, RolloutState } from './rollout-service.ts';

export interface ServeDeps {
  /** `serve.*`, `dashboard.*` (credentials) and the policy endpoints are read from it. */
  config: Config;
  logger: Logger;
  service: RolloutService;
}

export interface ServeServer {
  readonly url: string;
  readonly port: number;
  /** Stop listening and drop connections (waiting clients fetch their results again later). Safe to call twice. */
  close(): Promise<void>;
}

const MIB = 1024 * 1024;

/** The answer of a rollout's state: the response (200), still running (202), only its row left (410). */
function answer(c: Context, state: RolloutState, ngRolloutId: string) {
  if (state.state === 'done') return c.json(state.response.response, 200);
  if (state.state === 'gone') {
    return c.json({ error: `rollout ${ngRolloutId} finished and its response expired (serve.response_ttl_s, serve.fetched_ttl_s): its row is in the run's JSONL`, row: state.row }, 410);
  }
  return c.json({ status: 'pending', _ng_rollout_id: ngRolloutId, rollout_id: state.rolloutId }, 202, { Location: `/rollouts/${encodeURIComponent(ngRolloutId)}` });
}

export function buildServeApp(deps: ServeDeps): Hono {
  const { config, logger, service } = deps;
  const d = config.dashboard;
  const s = config.serve;
  const bounds: RequestBounds = {
    maxImageBytes: s.max_image_mib * MIB,
    maxImages: s.max_images,
    allowedBaseUrls: [config.policy_base_url, ...config.policy.allowed_base_urls],
  };
  const unknown = (c: Context, id: string) => c.json({ error: `no rollout ${JSON.stringify(id)} in run ${service.runId}: POST /run it first` }, 404);
  const app = new Hono();
  app.use('*', accessGuard(accessPolicy(s.host, { user: d.user, password: d.password, token: d.token }, false)));
  app.onError((err, c) => {
    if (err instanceof RequestRefused) return c.json({ error: err.message }, err.status);
    logger.error({ path: c.req.path, err: errorMessage(err) }, 'serve request failed');
    return c.json({ error: `the request could not be served: ${errorMessage(err)}; ask again (an accepted rollout is kept)` }, 503);
  });
  app.get('/health', (c) => c.json({ ok: true, run_id: service.runId }));
  app.post(
    '/run',
    bodyLimit({ maxSize: s.max_request_mib * MIB, onError: (c) => c.json({ error: `the body is over ${s.max_request_mib} MiB (serve.max_request_mib)` }, 413) }),
    async (c) => {
      let json: unknown;
      try {
        json = JSON.parse(await c.req.text());
      } catch {
        throw new RequestRefused(400, 'the body is not JSON: send one row of the dataset as a JSON object (Content-Type: application/json)');
      }
      const parsed = parseRunBody(json, bounds);
      const { ngRolloutId } = await service.accept(parsed);
      const state = await service.wait(ngRolloutId, c.req.raw.signal);
      return state ? answer(c, state, ngRolloutId) : unknown(c, ngRolloutId);
    },
  );
  app.get('/rollouts/:id', async (c) => {
    const id = c.req.param('id');
    const noWait = c.req.query('wait') === '0';
    const state = noWait ? await service.state(id) : await service.wait(id, c.req.raw.signal);
    return state ? answer(c, state, id) : unknown(c, id);
  });
  app.delete('/rollouts/:id', async (c) => {
    const id = c.req.param('id');
    const done = await service.cancel(id);
    if (done === null) return unknown(c, id);
    if (done === 'done') return c.json({ error: `rollout ${id} is already finished: GET /rollouts/${id} returns its result` }, 409);
    return c.json({ status: 'cancelled', _ng_rollout_id: id }, 202);
  });
  return app;
}

/** Listen on `serve.{host,port}`. */
export async function startServeServer(deps: ServeDeps): Promise<ServeServer> {
  const app = buildServeApp(deps);
  const { host, port } = deps.config.serve;
  const server = await listen(createAdaptorServer({ fetch: app.fetch }), host, port);
  return { url: `${server.origin}/`, port: server.port, close: server.close };
}
