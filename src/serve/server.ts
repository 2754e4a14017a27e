/**
 * `vcfleet serve`'s HTTP API (one Hono app on `serve.{host,port}`), the door NeMo Gym's agent servers
 * have:
 * - `POST /run`: one dataset row; answers with the rollout's verify-response row once it is done;
 * - `GET /rollouts/{id}`: the same by `_ng_rollout_id` (waits; `?wait=0`: 202 at once while it runs);
 * - `DELETE /rollouts/{id}`: cancel it (202; its row says so and is not scored);
 * - `POST /cancel`: cancel many (`{"ids": [...]}` or `{"weight_version": "..."}`: a step's stragglers);
 * - `POST /aggregate_metrics`: NeMo Gym's aggregate metrics of the rows posted (gym-metrics.ts);
 * - `GET /health`: liveness only (`{"ok": true}`), open to all.
 * Every other request passes the dashboard's access guard first (http/access.ts): with credentials
 * set every request needs them, loopback included (401 without), except from a peer address
 * `serve.allow_from` lists; bound beyond loopback credentials or that list are required to start.
 * Without either (loopback only) any local user may use every route.
 */
import { createAdaptorServer } from '@hono/node-server';
import type { IncomingMessage, Server as HttpServer } from 'node:http';
import type { Socket } from 'node:net';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Config } from '../shared/config/load.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { z } from 'zod';
import { accessGuard, accessPolicy, addressAllowlist, hasCredentials } from '../http/access.ts';
import { aggregateMetrics } from '../shared/output/gym-metrics.ts';
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
  app.use('*', accessGuard({ ...policy, authForReads: policy.authForReads || hasCredentials(credentials), allowFrom: addressAllowlist(s.allow_from), jsonErrors: true }));
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
  app.post(
    '/aggregate_metrics',
    bodyLimit({ maxSize: s.max_metrics_request_mib * MIB, onError: (c) => c.json({ error: `the body is over ${s.max_metrics_request_mib} MiB (serve.max_metrics_request_mib): post the rows in parts, or raise it` }, 413) }),
    async (c) => {
      let body: unknown;
      try {
        body = JSON.parse(await c.req.text());
      } catch {
        throw new RequestRefused(400, 'the body is not JSON: send {"verify_responses": [<row>, ...]} (the rows /run answered) or the list of rows');
      }
      return c.json(aggregateMetrics(metricsRows(body)), 200);
    },
  );
  return app;
}

/**
 * The rows of a `POST /aggregate_metrics` body, taken liberally: a list of rows; or an object holding
 * them as `verify_responses` (NeMo Gym's name), else as its one list-valued field. Each must be an object.
 */
export function metricsRows(body: unknown): Array<Record<string, unknown>> {
  let rows: unknown = body;
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const lists = Object.entries(body).filter(([, v]) => Array.isArray(v));
    const named = (body as Record<string, unknown>).verify_responses;
    rows = Array.isArray(named) ? named : lists.length === 1 ? lists[0][1] : undefined;
    if (rows === undefined) {
      throw new RequestRefused(400, `POST /aggregate_metrics takes {"verify_responses": [<row>, ...]} or a list of rows; this object has ${lists.length ? `several lists (${lists.map(([k]) => k).join(', ')})` : 'no list of rows'}`);
    }
  }
  if (!Array.isArray(rows)) throw new RequestRefused(400, 'POST /aggregate_metrics takes {"verify_responses": [<row>, ...]} or a list of rows');
  const bad = rows.findIndex((r) => r === null || typeof r !== 'object' || Array.isArray(r));
  if (bad >= 0) throw new RequestRefused(400, `row [${bad}] of POST /aggregate_metrics is not a JSON object (a verify-response row)`);
  return rows as Array<Record<string, unknown>>;
}

const CancelBodySchema = z
  .object({
    ids: z.array(z.union([z.string().min(1).max(256), z.number().int().min(0)])).max(10_000).optional(),
    weight_version: z.string().min(1).max(256).optional(),
  })
  .strict();

/**
 * Listen on `serve.{host,port}`, with bounds on what a connection may hold: its request's headers
 * within `headers_timeout_s` of opening (checked by a timer of its own, and by node's), the whole
 * request within `request_timeout_s`, `keep_alive_timeout_s` idle after a response, and at most
 * `max_connections` open: a socket that never sends a request (authenticated or not) is closed within
 * a minute, and a flood of them is refused past the cap and let go as they time out.
 */
export async function startServeServer(deps: ServeDeps): Promise<ServeServer> {
  const app = buildServeApp(deps);
  const s = deps.config.serve;
  const headersMs = s.headers_timeout_s * 1000;
  const server = createAdaptorServer({
    fetch: app.fetch,
    serverOptions: { headersTimeout: headersMs, requestTimeout: Math.max(s.request_timeout_s * 1000, headersMs), keepAliveTimeout: s.keep_alive_timeout_s * 1000, connectionsCheckingInterval: Math.min(5000, headersMs) },
  }) as HttpServer;
  server.maxConnections = s.max_connections;
  // Node checks header timeouts only while a request is being parsed: a socket that sends nothing at all is timed here.
  const silent = new WeakMap<Socket, NodeJS.Timeout>();
  server.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => socket.destroy(), headersMs);
    timer.unref();
    silent.set(socket, timer);
    socket.once('close', () => clearTimeout(timer));
  });
  server.on('request', (req: IncomingMessage) => clearTimeout(silent.get(req.socket)));
  const listening = await listen(server, s.host, s.port);
  return { url: `${listening.origin}/`, port: listening.port, close: listening.close };
}
