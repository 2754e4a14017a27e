/**
 * The in-sandbox half of the fake OpenSandbox server (fake-opensandbox-server.ts): the images it
 * knows and each sandbox's execd (`/ping`, streamed `POST /command`, `DELETE /command`,
 * `/files/upload` multipart, `/files/download`). Commands really run, as `bash -c` in a bubblewrap
 * sandbox laid out like the image: its user (uid 1000), a writable `/workspace`, `/tmp` and home,
 * OpenCode at `/opt/opencode/bin/opencode` (this checkout's npm binary) and Debian's Python toolkit,
 * unless the image is declared without them. As the real execd: a command's environment is the
 * image's with the create's `env` and the command's `envs` laid over it key by key (a `PATH` sent
 * replaces the image's), output is one event per non-empty line, a non-zero exit is an `error`
 * event with the code. The network is the host's (the sandbox reaches a gateway on this host); the
 * egress policy is recorded, not enforced.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { buildBwrapArgs } from '../../src/sandboxes/local/bwrap-policy.ts';
import { opencodeBinaryPath } from '../../src/sandboxes/local/opencode-binary.ts';

/** What the fake knows of an image. */
export interface FakeImage {
  /** The image's `ENV`. */
  env: Record<string, string>;
  /** The image's `USER` (uid and gid) and its home. */
  uid: number;
  home: string;
  /** OpenCode installed at /opt/opencode/bin/opencode. */
  opencode: boolean;
  /** python3 with pillow, numpy, scipy and OpenCV. */
  toolkit: boolean;
}

/** The project's sandbox image as sandbox_image/Dockerfile builds it. */
export const SANDBOX_IMAGE: FakeImage = {
  env: {
    PATH: '/opt/opencode/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/home/sandbox',
    OPENCODE_DISABLE_AUTOUPDATE: '1', OPENCODE_DISABLE_MODELS_FETCH: '1', OPENCODE_DISABLE_LSP_DOWNLOAD: '1', OPENCODE_DISABLE_SHARE: '1',
  },
  uid: 1000,
  home: '/home/sandbox',
  opencode: true,
  toolkit: true,
};

export const IMAGE_OPENCODE = '/opt/opencode/bin/opencode';
/** Where Debian's python3 finds pillow, numpy, scipy and cv2. */
const DIST_PACKAGES = '/usr/lib/python3/dist-packages';

export interface FakeSandbox {
  id: string;
  /** The create request as received. */
  create: Record<string, unknown>;
  image: FakeImage;
  metadata: Record<string, string>;
  dir: string;
  deleted: boolean;
  commands: Map<string, ChildProcess>;
  /** The sandbox's own host port (its execd, as the server publishes it), once listening. */
  hostPort: number;
  /** Token the egress sidecar's endpoint requires in `OPENSANDBOX-EGRESS-AUTH`. */
  egressToken: string;
}

export function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

export async function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Host path of a path the image's user may write: /workspace, /tmp, its home; null elsewhere. */
function hostPath(sb: FakeSandbox, p: string): string | null {
  const n = path.posix.normalize(p);
  for (const [inside, host] of [['/workspace', 'workspace'], ['/tmp', 'tmp'], [sb.image.home, 'home']] as const) {
    if (n.startsWith(`${inside}/`)) return path.join(sb.dir, host, n.slice(inside.length + 1));
  }
  return null;
}

export function killCommand(child: ChildProcess): void {
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

/** bwrap's options for one command: the local sandbox's layout, plus the image's user, home, OpenCode and toolkit. */
function imageArgs(sb: FakeSandbox, cwd: string): string[] {
  const args = buildBwrapArgs({
    workspaceHostDir: path.join(sb.dir, 'workspace'), tmpHostDir: path.join(sb.dir, 'tmp'), workdir: '/workspace', cwd, extraRoBinds: [],
    emptyFile: path.join(sb.dir, 'empty'), emptyDir: path.join(sb.dir, 'empty.d'), shareNet: true,
  });
  const image: string[] = ['--uid', String(sb.image.uid), '--gid', String(sb.image.uid), '--bind', path.join(sb.dir, 'home'), sb.image.home];
  if (sb.image.opencode) image.push('--ro-bind', opencodeBinaryPath({ agent: { opencode_bin: null } } as never), IMAGE_OPENCODE);
  if (!sb.image.toolkit) image.push('--ro-bind', path.join(sb.dir, 'empty.d'), DIST_PACKAGES);
  const at = args.findIndex((a, i) => a === '--remount-ro' && args[i + 1] === '/');
  return [...args.slice(0, at), ...image, ...args.slice(at)];
}

function runCommand(sb: FakeSandbox, body: Record<string, unknown>, res: http.ServerResponse): void {
  const id = `cmd-${sb.commands.size + 1}`;
  const env = { ...sb.image.env, ...(sb.create.env as Record<string, string> | undefined), ...(body.envs as Record<string, string> | undefined) };
  const child = spawn('/usr/bin/bwrap', [...imageArgs(sb, (body.cwd as string | undefined) ?? '/'), '--', '/bin/bash', '-c', String(body.command)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
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
}

async function upload(sb: FakeSandbox, req: http.IncomingMessage, res: http.ServerResponse, record: (body: unknown) => void): Promise<void> {
  const raw = await readBody(req);
  const form = await new Response(new Uint8Array(raw), { headers: { 'content-type': req.headers['content-type']! } }).formData();
  const meta = JSON.parse(await (form.get('metadata') as Blob).text()) as { path: string };
  const data = Buffer.from(await (form.get('file') as Blob).arrayBuffer());
  record({ metadata: meta, size: data.length });
  const target = hostPath(sb, meta.path);
  if (!target) return json(res, 500, { code: 'FILE_WRITE_ERROR', message: `open ${meta.path}: permission denied` });
  mkdirSync(path.dirname(target), { recursive: true });
  writeFileSync(target, data);
  res.writeHead(200).end();
}

/** A new sandbox's folders: its writable places and the empty file and folder that mask /proc entries. */
export function makeSandboxDirs(dir: string): void {
  for (const d of ['workspace', 'tmp', 'home', 'empty.d']) mkdirSync(path.join(dir, d), { recursive: true });
  writeFileSync(path.join(dir, 'empty'), '');
}

export interface ExecdOptions {
  /** `/ping` answers 503 (the sandbox never becomes ready). */
  failPing?: boolean;
  /** `DELETE /command` answers 200 but leaves the command running. */
  ignoreInterrupt?: boolean;
}

/**
 * One request to a sandbox's execd (the path after `/proxy/44772`), or to its egress sidecar's API
 * (`/proxy/18080`, which wants `OPENSANDBOX-EGRESS-AUTH`). `record` sets what the request log keeps of an upload.
 */
export async function serveExecd(
  sb: FakeSandbox, port: number, sub: string, query: URLSearchParams, req: http.IncomingMessage, res: http.ServerResponse,
  body: unknown, options: ExecdOptions, record: (body: unknown) => void,
): Promise<void> {
  if (port === 18080) {
    if (req.headers['opensandbox-egress-auth'] !== sb.egressToken) return json(res, 401, { code: 'UNAUTHORIZED', message: 'missing or wrong OPENSANDBOX-EGRESS-AUTH' });
    return json(res, 200, { status: 'ok', policy: sb.create.networkPolicy ?? null });
  }
  if (port !== 44772) return json(res, 502, { code: 'PROXY_ERROR', message: `nothing listens on port ${port} in ${sb.id}` });
  const route = `${req.method} ${sub}`;
  if (route === 'GET /ping') return options.failPing ? json(res, 503, { code: 'UNAVAILABLE', message: 'not ready' }) : void res.writeHead(200).end('pong');
  if (route === 'POST /command') return runCommand(sb, body as Record<string, unknown>, res);
  if (route === 'DELETE /command') {
    const child = sb.commands.get(query.get('id') ?? '');
    if (child && !options.ignoreInterrupt) child.kill('SIGTERM');
    return void res.writeHead(child ? 200 : 404).end();
  }
  if (route === 'POST /files/upload') return upload(sb, req, res, record);
  if (route === 'GET /files/download') {
    const target = hostPath(sb, query.get('path') ?? '');
    try {
      return void res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(readFileSync(target ?? '/nonexistent'));
    } catch {
      return json(res, 404, { code: 'FILE_NOT_FOUND', message: 'no such file' });
    }
  }
  json(res, 404, { code: 'NOT_FOUND', message: `no route ${route}` });
}
