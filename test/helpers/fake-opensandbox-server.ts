/**
 * A scripted OpenSandbox server on real node:http: the lifecycle API (`/v1/sandboxes...`) and each
 * sandbox's execd (`/execd/<id>/...`: ping, streamed `POST /command`, `DELETE /command`,
 * `/files/upload` multipart, `/files/download`), in the shapes the official JS SDK sends and
 * expects. Every request is recorded. Commands really run, as `bash -c` inside a local bubblewrap
 * sandbox whose `/workspace` and `/tmp` are the fake sandbox's folders; like the real execd, output
 * is streamed one event per non-empty line and a non-zero exit is an `error` event with the code.
 *
 * As the real lifecycle server answers (found by running it): a create is 202 with the sandbox
 * already `Running`; a `networkPolicy` is refused with 400 `SANDBOX::INVALID_PARAMETER` unless the
 * server has an egress image (`egressImage`); errors are `{code, message}` (`MISSING_API_KEY`,
 * `INVALID_API_KEY`, `DOCKER::SANDBOX_NOT_FOUND`, also on a second delete,
 * `DOCKER::SANDBOX_IMAGE_PULL_FAILED`), validation errors `422 {"detail": [...]}` (a timeout under
 * 60 s, no image); a sandbox's endpoint is its host port, or the server's proxy with
 * `use_server_proxy=true` (`hostPortsUnreachable`: the host port answers nothing).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { buildBwrapArgs } from '../../src/sandboxes/local/bwrap-policy.ts';

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  /** Parsed JSON for JSON bodies; `{metadata, size}` for uploads. */
  body: unknown;
}

export interface FakeSandbox {
  id: string;
  /** The create request as received. */
  create: Record<string, unknown>;
  metadata: Record<string, string>;
  dir: string;
  deleted: boolean;
  commands: Map<string, ChildProcess>;
}

export interface FakeOpenSandboxOptions {
  /** When set, every request must carry it in `OPEN-SANDBOX-API-KEY` (else 401). */
  apiKey?: string;
  /** execd `/ping` answers 503 (the sandbox never becomes ready). */
  failPing?: boolean;
  /** `POST /v1/sandboxes` answers 500. */
  failCreate?: boolean;
  /** `DELETE /command` answers 200 but leaves the command running. */
  ignoreInterrupt?: boolean;
  /** The server has an egress sidecar image configured, so it accepts a `networkPolicy`. Default true. */
  egressImage?: boolean;
  /** Images that cannot be pulled: their create answers 500 `DOCKER::SANDBOX_IMAGE_PULL_FAILED`. */
  unpullable?: string[];
  /** The sandboxes' host ports cannot be reached from the client: only the server's proxy works. */
  hostPortsUnreachable?: boolean;
}

export interface FakeOpenSandbox {
  /** `host:port`, as `OPENSANDBOX_DOMAIN`. */
  domain: string;
  requests: RecordedRequest[];
  sandboxes: Map<string, FakeSandbox>;
  options: FakeOpenSandboxOptions;
  /** Adds a sandbox directly (e.g. one left by a dead worker). */
  seed(metadata: Record<string, string>): FakeSandbox;
  close(): Promise<void>;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, rec: RecordedRequest, m: RegExpMatchArray) => Promise<void> | void;

const NOT_FOUND = (id: string) => ({ code: 'DOCKER::SANDBOX_NOT_FOUND', message: `Sandbox ${id} not found.` });

/** FastAPI's validation error of one field of the create request. */
function invalid(loc: string[], msg: string, type: string, input: unknown) {
  return { detail: [{ type, loc: ['body', ...loc], msg, input }] };
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

async function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function info(sb: FakeSandbox): Record<string, unknown> {
  const now = new Date().toISOString();
  return { id: sb.id, image: sb.create.image, status: { state: 'Running' }, metadata: sb.metadata, entrypoint: ['tail', '-f', '/dev/null'], createdAt: now, expiresAt: now };
}

/** Host path of a path inside a fake sandbox (only /workspace and /tmp exist as files). */
function hostPath(sb: FakeSandbox, p: string): string | null {
  const m = /^\/(workspace|tmp)\/(.+)$/.exec(path.posix.normalize(p));
  return m ? path.join(sb.dir, m[1]!, m[2]!) : null;
}

function killCommand(child: ChildProcess): void {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

/** Emits each complete non-empty line (split on \n or \r), as execd does. */
function lineEmitter(emit: (line: string) => void): { push(b: Buffer): void; end(): void } {
  let pending = '';
  return {
    push(b) {
      const parts = (pending + b.toString('utf8')).split(/[\r\n]/);
      pending = parts.pop()!;
      for (const p of parts) if (p) emit(p);
    },
    end() {
      if (pending) emit(pending);
    },
  };
}

function runCommand(sb: FakeSandbox, body: Record<string, unknown>, req: http.IncomingMessage, res: http.ServerResponse): void {
  const id = `cmd-${sb.commands.size + 1}`;
  const cwd = (body.cwd as string | undefined) ?? '/';
  const args = buildBwrapArgs({
    workspaceHostDir: path.join(sb.dir, 'workspace'), tmpHostDir: path.join(sb.dir, 'tmp'), workdir: '/workspace', cwd, extraRoBinds: [],
    emptyFile: path.join(sb.dir, 'empty'), emptyDir: path.join(sb.dir, 'empty.d'),
  });
  const env = { PATH: '/usr/local/bin:/usr/bin:/bin', ...(sb.create.env as Record<string, string>), ...(body.envs as Record<string, string> | undefined) };
  const child = spawn('bwrap', [...args, '--', 'bash', '-c', String(body.command)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  sb.commands.set(id, child);
  const started = Date.now();
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const send = (ev: Record<string, unknown>): void => void res.write(`data: ${JSON.stringify({ ...ev, timestamp: Date.now() })}\n\n`);
  send({ type: 'init', text: id });
  const out = lineEmitter((text) => send({ type: 'stdout', text }));
  const err = lineEmitter((text) => send({ type: 'stderr', text }));
  child.stdout!.on('data', (b: Buffer) => out.push(b));
  child.stderr!.on('data', (b: Buffer) => err.push(b));
  const timer = typeof body.timeout === 'number' ? setTimeout(() => killCommand(child), body.timeout) : undefined;
  // Like execd's CommandContext: a client that goes away kills the command.
  res.on('close', () => killCommand(child));
  child.on('close', (code, signal) => {
    clearTimeout(timer);
    out.end();
    err.end();
    const exit = code ?? 128 + (signal ? os.constants.signals[signal] : 0);
    if (exit === 0) send({ type: 'execution_complete', execution_time: Date.now() - started });
    else send({ type: 'error', error: { ename: 'CommandExecError', evalue: String(exit), traceback: [] } });
    res.end();
  });
  void req;
}

async function upload(sb: FakeSandbox, req: http.IncomingMessage, res: http.ServerResponse, rec: RecordedRequest): Promise<void> {
  const raw = await readBody(req);
  const form = await new Response(new Uint8Array(raw), { headers: { 'content-type': req.headers['content-type']! } }).formData();
  const meta = JSON.parse(await (form.get('metadata') as Blob).text()) as { path: string };
  const data = Buffer.from(await (form.get('file') as Blob).arrayBuffer());
  rec.body = { metadata: meta, size: data.length };
  const target = hostPath(sb, meta.path);
  if (!target) return json(res, 400, { code: 'INVALID_PATH', message: `cannot write ${meta.path}` });
  mkdirSync(path.dirname(target), { recursive: true });
  writeFileSync(target, data);
  res.writeHead(200).end();
}

export async function startFakeOpenSandbox(options: FakeOpenSandboxOptions = {}): Promise<FakeOpenSandbox> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'fake-opensandbox-'));
  const sandboxes = new Map<string, FakeSandbox>();
  const requests: RecordedRequest[] = [];
  let port = 0;

  const newSandbox = (create: Record<string, unknown>): FakeSandbox => {
    const id = `sbx-${sandboxes.size + 1}`;
    const dir = path.join(root, id);
    mkdirSync(path.join(dir, 'workspace'), { recursive: true });
    mkdirSync(path.join(dir, 'tmp'));
    mkdirSync(path.join(dir, 'empty.d'));
    writeFileSync(path.join(dir, 'empty'), '');
    const sb: FakeSandbox = { id, create, metadata: (create.metadata as Record<string, string>) ?? {}, dir, deleted: false, commands: new Map() };
    sandboxes.set(id, sb);
    return sb;
  };
  const live = (id: string): FakeSandbox | undefined => {
    const sb = sandboxes.get(id);
    return sb && !sb.deleted ? sb : undefined;
  };

  const routes: [string, RegExp, Handler][] = [
    ['POST', /^\/v1\/sandboxes$/, (_q, res, rec) => {
      if (options.failCreate) return json(res, 500, { code: 'INTERNAL', message: 'scripted create failure' });
      const body = (rec.body ?? {}) as Record<string, unknown>;
      const image = (body.image as { uri?: unknown } | undefined)?.uri;
      if (typeof image !== 'string' || image === '') return json(res, 422, invalid(['image'], 'Field required', 'missing', body.image ?? null));
      if (typeof body.timeout === 'number' && body.timeout < 60) {
        return json(res, 422, invalid(['timeout'], 'Input should be greater than or equal to 60', 'greater_than_equal', body.timeout));
      }
      if (body.networkPolicy && options.egressImage === false) {
        return json(res, 400, { code: 'SANDBOX::INVALID_PARAMETER', message: 'Network policy requires egress.image to be configured on the server.' });
      }
      if (options.unpullable?.includes(image)) {
        return json(res, 500, { code: 'DOCKER::SANDBOX_IMAGE_PULL_FAILED', message: `Failed to pull image ${image}: pull access denied for ${image}, repository does not exist or may require 'docker login'` });
      }
      const sb = newSandbox(body);
      json(res, 202, info(sb));
    }],
    ['GET', /^\/v1\/sandboxes$/, (_q, res, rec) => {
      const filter = new URLSearchParams(rec.query.get('metadata') ?? '');
      const items = [...sandboxes.values()].filter((sb) => !sb.deleted && [...filter].every(([k, v]) => sb.metadata[k] === v));
      const page = Number(rec.query.get('page') ?? 1);
      const size = Number(rec.query.get('pageSize') ?? 20);
      const slice = items.slice((page - 1) * size, page * size);
      json(res, 200, { items: slice.map(info), pagination: { page, pageSize: size, totalItems: items.length, totalPages: Math.ceil(items.length / size), hasNextPage: page * size < items.length } });
    }],
    ['GET', /^\/v1\/sandboxes\/([^/]+)$/, (_q, res, _r, m) => {
      const sb = live(m[1]!);
      return sb ? json(res, 200, info(sb)) : json(res, 404, NOT_FOUND(m[1]!));
    }],
    ['DELETE', /^\/v1\/sandboxes\/([^/]+)$/, (_q, res, _r, m) => {
      const sb = live(m[1]!);
      if (!sb) return json(res, 404, NOT_FOUND(m[1]!));
      sb.deleted = true;
      for (const c of sb.commands.values()) killCommand(c);
      rmSync(sb.dir, { recursive: true, force: true });
      res.writeHead(204).end();
    }],
    ['GET', /^\/v1\/sandboxes\/([^/]+)\/endpoints\/(\d+)$/, (_q, res, rec, m) => {
      if (!live(m[1]!)) return json(res, 404, NOT_FOUND(m[1]!));
      const proxied = rec.query.get('use_server_proxy') === 'true';
      // A host port of the sandbox (here: port 9 of the loopback, where nothing answers, when unreachable), or the server's proxy.
      const host = proxied || !options.hostPortsUnreachable ? `127.0.0.1:${port}` : '127.0.0.1:9';
      json(res, 200, { endpoint: `${host}/execd/${m[1]}/${m[2]}` });
    }],
    ['GET', /^\/execd\/([^/]+)\/\d+\/ping$/, (_q, res) => {
      if (options.failPing) return json(res, 503, { code: 'UNAVAILABLE', message: 'not ready' });
      res.writeHead(200).end('pong');
    }],
    ['POST', /^\/execd\/([^/]+)\/\d+\/command$/, (q, res, rec, m) => runCommand(live(m[1]!)!, rec.body as Record<string, unknown>, q, res)],
    ['DELETE', /^\/execd\/([^/]+)\/\d+\/command$/, (_q, res, rec, m) => {
      const child = live(m[1]!)?.commands.get(rec.query.get('id') ?? '');
      if (child && !options.ignoreInterrupt) child.kill('SIGTERM');
      res.writeHead(child ? 200 : 404).end();
    }],
    ['POST', /^\/execd\/([^/]+)\/\d+\/files\/upload$/, (q, res, rec, m) => upload(live(m[1]!)!, q, res, rec)],
    ['GET', /^\/execd\/([^/]+)\/\d+\/files\/download$/, (_q, res, rec, m) => {
      const target = hostPath(live(m[1]!)!, rec.query.get('path') ?? '');
      try {
        res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(readFileSync(target ?? '/nonexistent'));
      } catch {
        json(res, 404, { code: 'FILE_NOT_FOUND', message: 'no such file' });
      }
    }],
  ];

  const server = http.createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url!, 'http://fake');
      const rec: RecordedRequest = { method: req.method!, path: url.pathname, query: url.searchParams, headers: req.headers, body: undefined };
      requests.push(rec);
      const key = req.headers['open-sandbox-api-key'];
      if (options.apiKey && !key) return json(res, 401, { code: 'MISSING_API_KEY', message: 'Authentication credentials were not provided. Please include the OPEN-SANDBOX-API-KEY header.' });
      if (options.apiKey && key !== options.apiKey) return json(res, 401, { code: 'INVALID_API_KEY', message: 'Invalid API key.' });
      for (const [method, re, handler] of routes) {
        const m = url.pathname.match(re);
        if (!m || method !== req.method) continue;
        const execd = m[1] && url.pathname.startsWith('/execd/');
        if (execd && !live(m[1]!)) return json(res, 404, NOT_FOUND(m[1]!));
        if (req.headers['content-type']?.startsWith('application/json')) rec.body = JSON.parse((await readBody(req)).toString() || 'null');
        return await handler(req, res, rec, m);
      }
      json(res, 404, { code: 'NOT_FOUND', message: `no route ${req.method} ${url.pathname}` });
    })().catch((err: unknown) => json(res, 500, { code: 'FAKE_ERROR', message: String(err) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;

  return {
    domain: `127.0.0.1:${port}`,
    requests,
    sandboxes,
    options,
    seed: (metadata) => newSandbox({ image: { uri: 'seeded' }, metadata }),
    close: async () => {
      for (const sb of sandboxes.values()) for (const c of sb.commands.values()) killCommand(c);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
