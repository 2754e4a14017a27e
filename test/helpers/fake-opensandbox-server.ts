/**
 * A scripted OpenSandbox server on real node:http, answering as the real lifecycle server does (found
 * by running alibaba/OpenSandbox's server with its Docker runtime): `/v1/sandboxes...` and its proxy
 * `/sandboxes/<id>/proxy/<port>/...` (no `/v1`), each sandbox's execd on a host port of its own
 * (`<host>:<port>/proxy/44772`, unauthenticated, as the server publishes it) with what runs there in
 * fake-opensandbox-execd.ts. Every request is recorded.
 *
 * What it says: 401 `MISSING_API_KEY` / `INVALID_API_KEY`; a create is 202 with
 * `status {state: "Running", reason, message, lastTransitionAt}` and no `image`, after the egress
 * sidecar started (`egressStartMs`) when it has a `networkPolicy`; FastAPI's 422 `{"detail": [...]}`
 * for a `timeout` under 60, no image or no entrypoint; 400 `SANDBOX::INVALID_PARAMETER` for a
 * `networkPolicy` on a server without egress (`egressImage: false`); 500
 * `DOCKER::SANDBOX_IMAGE_PULL_FAILED` for an image not in the engine; 404 `DOCKER::SANDBOX_NOT_FOUND`
 * for an unknown id (a delete is 204, then 404); a list is `{items, pagination}`; a sandbox is removed
 * `timeout` seconds after its create (`secondMs`); the egress endpoint carries `OPENSANDBOX-EGRESS-AUTH`.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { json, killCommand, makeSandboxDirs, readBody, SANDBOX_IMAGE, serveExecd, type ExecdOptions, type FakeImage, type FakeSandbox } from './fake-opensandbox-execd.ts';

export { SANDBOX_IMAGE, IMAGE_OPENCODE, type FakeImage, type FakeSandbox } from './fake-opensandbox-execd.ts';

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  /** Parsed JSON for JSON bodies; `{metadata, size}` for uploads. */
  body: unknown;
}

export interface FakeOpenSandboxOptions extends ExecdOptions {
  /** When set, every request to the server must carry it in `OPEN-SANDBOX-API-KEY` (else 401). */
  apiKey?: string;
  /** `POST /v1/sandboxes` answers 500. */
  failCreate?: boolean;
  /** The server has egress configured (`[egress] image`), so it accepts a `networkPolicy`. Default true. */
  egressImage?: boolean;
  /** How long the server waits for a new sandbox's egress sidecar, in ms; default 200. */
  egressStartMs?: number;
  /** The images in the engine, by URI; default every image but `unpullable` is the project's sandbox image. */
  images?: Record<string, Partial<FakeImage>>;
  /** Images that cannot be pulled: their create answers 500 `DOCKER::SANDBOX_IMAGE_PULL_FAILED`. */
  unpullable?: string[];
  /** The sandboxes' host ports cannot be reached from the client: only the server's proxy works. */
  hostPortsUnreachable?: boolean;
  /** Milliseconds in one second of a sandbox's `timeout` (a test's TTL passes sooner); default 1000. */
  secondMs?: number;
}

export interface FakeOpenSandbox {
  /** `host:port`, as `OPENSANDBOX_DOMAIN`. */
  domain: string;
  requests: RecordedRequest[];
  sandboxes: Map<string, FakeSandbox>;
  options: FakeOpenSandboxOptions;
  /** Adds a sandbox directly (e.g. one left by a dead worker). */
  seed(metadata: Record<string, string>): Promise<FakeSandbox>;
  close(): Promise<void>;
}

const NOT_FOUND = (id: string) => ({ code: 'DOCKER::SANDBOX_NOT_FOUND', message: `Sandbox ${id} not found.` });
const EXECD_PORT = 44772;

/** FastAPI's validation error of one field of the create request. */
function invalid(loc: string, msg: string, type: string, input: unknown) {
  return { detail: [{ type, loc: ['body', loc], msg, input }] };
}

type Sandbox = FakeSandbox & { createdAt: number; ttlMs: number; listener: http.Server; ttl?: NodeJS.Timeout };

function info(sb: Sandbox, withImage: boolean): Record<string, unknown> {
  const created = new Date(sb.createdAt).toISOString();
  return {
    id: sb.id, ...(withImage ? { image: sb.create.image } : {}),
    status: { state: 'Running', reason: 'SANDBOX_RUNNING', message: 'Sandbox is running', lastTransitionAt: created },
    metadata: sb.metadata, entrypoint: sb.create.entrypoint, createdAt: created, expiresAt: new Date(sb.createdAt + sb.ttlMs).toISOString(),
  };
}


export async function startFakeOpenSandbox(options: FakeOpenSandboxOptions = {}): Promise<FakeOpenSandbox> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'fake-opensandbox-'));
  const sandboxes = new Map<string, Sandbox>();
  const requests: RecordedRequest[] = [];
  let port = 0;

  const record = (req: http.IncomingMessage, url: URL): RecordedRequest => {
    const rec: RecordedRequest = { method: req.method!, path: url.pathname, query: url.searchParams, headers: req.headers, body: undefined };
    requests.push(rec);
    return rec;
  };
  const jsonBody = async (req: http.IncomingMessage, rec: RecordedRequest): Promise<unknown> => {
    if (req.headers['content-type']?.startsWith('application/json')) rec.body = JSON.parse((await readBody(req)).toString() || 'null');
    return rec.body;
  };
  const execd = async (sb: Sandbox, p: number, sub: string, req: http.IncomingMessage, res: http.ServerResponse, rec: RecordedRequest): Promise<void> =>
    serveExecd(sb, p, sub, rec.query, req, res, await jsonBody(req, rec), options, (b) => (rec.body = b));

  const remove = (sb: Sandbox): void => {
    sb.deleted = true;
    clearTimeout(sb.ttl);
    for (const c of sb.commands.values()) killCommand(c);
    sb.listener.closeAllConnections();
    sb.listener.close();
    rmSync(sb.dir, { recursive: true, force: true });
  };
  const live = (id: string): Sandbox | undefined => {
    const sb = sandboxes.get(id);
    return sb && !sb.deleted ? sb : undefined;
  };
  const newSandbox = async (create: Record<string, unknown>, image: FakeImage): Promise<Sandbox> => {
    const id = `sbx-${sandboxes.size + 1}`;
    const dir = path.join(root, id);
    makeSandboxDirs(dir);
    // The sandbox's execd, published on a host port of its own.
    const listener = http.createServer((req, res) => {
      const url = new URL(req.url!, 'http://fake');
      const rec = record(req, url);
      const m = /^\/proxy\/(\d+)(\/.*)$/.exec(url.pathname);
      if (!m || !live(id)) return json(res, 404, { code: 'NOT_FOUND', message: `no route ${url.pathname}` });
      execd(sb, Number(m[1]), m[2]!, req, res, rec).catch((err: unknown) => json(res, 500, { code: 'FAKE_ERROR', message: String(err) }));
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const ttlMs = typeof create.timeout === 'number' ? create.timeout * (options.secondMs ?? 1000) : 3_600_000;
    const sb: Sandbox = {
      id, create, image, metadata: (create.metadata as Record<string, string>) ?? {}, dir, deleted: false, commands: new Map(),
      hostPort: (listener.address() as { port: number }).port, egressToken: randomUUID(), createdAt: Date.now(), ttlMs, listener,
    };
    // The server removes a sandbox at its timeout.
    sb.ttl = setTimeout(() => remove(sb), ttlMs).unref();
    sandboxes.set(id, sb);
    return sb;
  };
  const imageOf = (uri: string): FakeImage | null => {
    if (options.unpullable?.includes(uri)) return null;
    if (!options.images) return SANDBOX_IMAGE;
    const declared = options.images[uri];
    return declared ? { ...SANDBOX_IMAGE, ...declared } : null;
  };

  const create = async (res: http.ServerResponse, body: Record<string, unknown>): Promise<void> => {
    if (options.failCreate) return json(res, 500, { code: 'INTERNAL', message: 'scripted create failure' });
    const uri = (body.image as { uri?: unknown } | undefined)?.uri;
    if (typeof uri !== 'string' || uri === '') return json(res, 422, invalid('image', 'Field required', 'missing', body.image ?? null));
    if (!Array.isArray(body.entrypoint) || body.entrypoint.length === 0) return json(res, 422, invalid('entrypoint', 'Field required', 'missing', body.entrypoint ?? null));
    if (typeof body.timeout === 'number' && body.timeout < 60) return json(res, 422, invalid('timeout', 'Input should be greater than or equal to 60', 'greater_than_equal', body.timeout));
    if (body.networkPolicy && options.egressImage === false) {
      return json(res, 400, { code: 'SANDBOX::INVALID_PARAMETER', message: 'Network policy requires egress.image to be configured on the server.' });
    }
    const image = imageOf(uri);
    if (!image) return json(res, 500, { code: 'DOCKER::SANDBOX_IMAGE_PULL_FAILED', message: `Failed to pull image ${uri}: pull access denied for ${uri}, repository does not exist or may require 'docker login'` });
    const sb = await newSandbox(body, image);
    // The server answers once the egress sidecar is up.
    if (body.networkPolicy) await new Promise((resolve) => setTimeout(resolve, options.egressStartMs ?? 200));
    json(res, 202, info(sb, false));
  };

  const lifecycle = async (req: http.IncomingMessage, res: http.ServerResponse, url: URL, rec: RecordedRequest): Promise<void> => {
    const route = `${req.method} ${url.pathname}`;
    if (route === 'POST /v1/sandboxes') return create(res, ((await jsonBody(req, rec)) ?? {}) as Record<string, unknown>);
    if (route === 'GET /v1/sandboxes') {
      const filter = new URLSearchParams(rec.query.get('metadata') ?? '');
      const items = [...sandboxes.values()].filter((sb) => !sb.deleted && [...filter].every(([k, v]) => sb.metadata[k] === v));
      const page = Number(rec.query.get('page') ?? 1);
      const size = Number(rec.query.get('pageSize') ?? 20);
      const slice = items.slice((page - 1) * size, page * size);
      return json(res, 200, { items: slice.map((sb) => info(sb, true)), pagination: { page, pageSize: size, totalItems: items.length, totalPages: Math.ceil(items.length / size), hasNextPage: page * size < items.length } });
    }
    const one = /^\/v1\/sandboxes\/([^/]+)(?:\/endpoints\/(\d+))?$/.exec(url.pathname);
    const proxied = /^\/sandboxes\/([^/]+)\/proxy\/(\d+)(\/.*)$/.exec(url.pathname);
    const sb = live((one ?? proxied)?.[1] ?? '');
    if ((one || proxied) && !sb) return json(res, 404, NOT_FOUND((one ?? proxied)![1]!));
    if (proxied) return execd(sb!, Number(proxied[2]), proxied[3]!, req, res, rec);
    if (one && !one[2] && req.method === 'GET') return json(res, 200, info(sb!, true));
    if (one && !one[2] && req.method === 'DELETE') {
      remove(sb!);
      return void res.writeHead(204).end();
    }
    if (one?.[2] && req.method === 'GET') {
      const p = Number(one[2]);
      const viaServer = rec.query.get('use_server_proxy') === 'true';
      // The sandbox's host port (port 9 of the loopback, where nothing answers, when unreachable), or the server's proxy.
      const endpoint = viaServer ? `127.0.0.1:${port}/sandboxes/${sb!.id}/proxy/${p}` : `127.0.0.1:${options.hostPortsUnreachable ? 9 : sb!.hostPort}/proxy/${p}`;
      return json(res, 200, p === EXECD_PORT ? { endpoint } : { endpoint, headers: { 'OPENSANDBOX-EGRESS-AUTH': sb!.egressToken } });
    }
    json(res, 404, { detail: 'Not Found' });
  };

  const server = http.createServer((req, res) => {
    const url = new URL(req.url!, 'http://fake');
    const rec = record(req, url);
    const key = req.headers['open-sandbox-api-key'];
    if (options.apiKey && !key) return json(res, 401, { code: 'MISSING_API_KEY', message: 'Authentication credentials were not provided. Please include the OPEN-SANDBOX-API-KEY header.' });
    if (options.apiKey && key !== options.apiKey) return json(res, 401, { code: 'INVALID_API_KEY', message: 'Invalid API key.' });
    lifecycle(req, res, url, rec).catch((err: unknown) => json(res, 500, { code: 'FAKE_ERROR', message: String(err) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;

  return {
    domain: `127.0.0.1:${port}`,
    requests,
    sandboxes,
    options,
    seed: (metadata) => newSandbox({ image: { uri: 'seeded' }, entrypoint: ['tail', '-f', '/dev/null'], metadata }, SANDBOX_IMAGE),
    close: async () => {
      for (const sb of sandboxes.values()) if (!sb.deleted) remove(sb);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
