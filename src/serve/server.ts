/**
 * `vcfleet serve`'s HTTP API (one Hono app on `serve.{host,port}`), the door NeMo Gym's agent servers
 * have:
 * - `POST /run`: one dataset row; answers with the rollout's verify-response row once it is done;
 * - `GET /rollouts/{id}`: the same by `_ng_rollout_id` (waits; `?wait=0`: 202 at once while it runs);
 * - `DELETE /rollouts/{id}`: cancel it (202; its row says so and is not scored);
 * - `POST /cancel`: cancel many (`{"ids": [...]}` or `{"weight_version": "..."}`: a step's stragglers);
 * - `GET /health`: liveness only (`{"ok": true}`), open to all.
 * Every other request passes the dashboard's access guard first (http/access.ts): with credentials
 * set every request needs them, loopback included (401 without); bound beyond loopback credentials
 * are required to start. Without credentials (loopback only) any local user may use every route.
 */
import { createAdaptorServer } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Config } from '../shared/config/load.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { z } from 'zod';
import { accessGuard, accessPolicy, hasCredentials } from '../http/access.ts';
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
  // Before the guard: a probe learns the service is alive, nothing else (not even the run).
  app.get('/health', (c) => c.json({ ok: true }));
  const credentials = { user: d.user, password: d.password, token: d.token };
  const policy = accessPolicy(s.host, credentials, false);
  // With credentials set, reads need them too, loopback included: transcripts and gold answers are the clients' own.
  app.use('*', accessGuard({ ...policy, authForReads: policy.authForReads || hasCredentials(credentials), jsonErrors: true }));
  app.onError((err, c) => {
    if (err instanceof RequestRefused) {
      if (err.retryAfterS !== undefined) c.header('Retry-After', String(err.retryAfterS));
      return c.json({ error: err.message }, err.status);
    }
    logger.error({ path: c.req.path, err: errorMessage(err) }, 'serve request failed');
    return c.json({ error: `the request could not be served: ${errorMessage(err)}; ask again (an accepted rollout is kept)` }, 503);
  });
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
      if (s.require_weight_version && parsed.body.policy?.weight_version === undefined) {
        throw new RequestRefused(400, 'policy.weight_version is missing: this service requires it (serve.require_weight_version), so that a rollout is never answered with older weights; send {"policy": {"weight_version": "<step>"}} with each row');
      }
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
  app.post('/cancel', bodyLimit({ maxSize: 4 * MIB, onError: (c) => c.json({ error: 'the body of POST /cancel is over 4 MiB: cancel in several calls' }, 413) }), async (c) => {
    let body: unknown;
    try {
      body = await c.req.json();
    } catch {
      throw new RequestRefused(400, 'the body is not JSON: send {"ids": ["<_ng_rollout_id>", ...]} or {"weight_version": "<version>"}');
    }
    const parsed = CancelBodySchema.safeParse(body);
    if (!parsed.success || (parsed.data.ids === undefined && parsed.data.weight_version === undefined)) {
      throw new RequestRefused(400, 'POST /cancel takes {"ids": ["<_ng_rollout_id>", ...]} (at most 10000) or {"weight_version": "<version>"} (every pending rollout of it), or both; nothing else');
    }
    const out = await service.cancelMany({ ids: parsed.data.ids?.map(String), weightVersion: parsed.data.weight_version });
    return c.json(out, 202);
  });
  return app;
}

const CancelBodySchema = z
  .object({
    ids: z.array(z.union([z.string().min(1).max(256), z.number().int().min(0)])).max(10_000).optional(),
    weight_version: z.string().min(1).max(256).optional(),
  })
  .strict();

/** Listen on `serve.{host,port}`. */
export async function startServeServer(deps: ServeDeps): Promise<ServeServer> {
  const app = buildServeApp(deps);
  const { host, port } = deps.config.serve;
  const server = await listen(createAdaptorServer({ fetch: app.fetch }), host, port);
  return { url: `${server.origin}/`, port: server.port, close: server.close };
}
