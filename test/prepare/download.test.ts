import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/shared/config/load.ts';
import { ConfigError, DataError, InfraError } from '../../src/shared/errors.ts';
import { downloadFile, downloadPath, huggingFaceUrl } from '../../src/prepare/download.ts';
import { createProgress } from '../../src/prepare/download-progress.ts';
import { prepareBenchmark } from '../../src/prepare/prepare.ts';
import { writeFixtureParquet } from '../helpers/fixture-parquet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { captureLogger, textSink } from '../helpers/log-capture.ts';
import { networkFailure } from '../../src/prepare/network-failure.ts';

interface FileServer {
  endpoint: string;
  /** The Range header of each request (null: none). */
  ranges: Array<string | null>;
  server: Server;
}

interface ServeOptions {
  /** Cut the connection after this many body bytes on the first N requests. */
  dropAfterBytes?: number;
  dropTimes?: number;
  /** Ignore Range headers (always answer 200 with the whole file). */
  ignoreRange?: boolean;
  /** Answer the first `failTimes` requests with this HTTP status (a server in trouble). */
  failStatus?: number;
  failTimes?: number;
}

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  removeTmpDirs();
});

/** A local stand-in for the Hugging Face resolve endpoint, serving `body` at any `/datasets/...` path. */
async function serve(body: Buffer, options: ServeOptions = {}): Promise<FileServer> {
  const ranges: Array<string | null> = [];
  let drops = options.dropTimes ?? 0;
  let fails = options.failTimes ?? 0;
  const server = createServer((req, res) => {
    ranges.push(req.headers.range ?? null);
    if (fails > 0 && options.failStatus) {
      fails--;
      res.writeHead(options.failStatus).end('try later');
      return;
    }
    if (!req.url?.startsWith('/datasets/UnipatAI/BabyVision/resolve/')) {
      res.writeHead(404).end('not found');
      return;
    }
    const m = options.ignoreRange ? null : /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const start = m ? Number(m[1]) : 0;
    if (start >= body.length && m) {
      res.writeHead(416, { 'Content-Range': `bytes */${body.length}` }).end();
      return;
    }
    const headers = { 'Content-Length': String(body.length - start), 'Accept-Ranges': 'bytes' };
    if (m) res.writeHead(206, { ...headers, 'Content-Range': `bytes ${start}-${body.length - 1}/${body.length}` });
    else res.writeHead(200, headers);
    if (drops > 0 && options.dropAfterBytes !== undefined) {
      drops--;
      res.write(body.subarray(start, start + options.dropAfterBytes), () => setTimeout(() => res.socket?.destroy(), 50));
      return;
    }
    res.end(body.subarray(start));
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, ranges, server };
}

function setup(rows = 120) {
  const root = createTmpDir();
  const fx = writeFixtureParquet(path.join(root, 'source.parquet'), { rows });
  const body = readFileSync(fx.path);
  const dataDir = path.join(root, 'data');
  return { root, fx, body, dataDir };
}

function source(endpoint: string) {
  return ConfigSchema.parse({ babyvision: { endpoint } }).babyvision;
}

describe('huggingFaceUrl', () => {
  it('builds the resolve URL of the pinned revision from a configurable endpoint', () => {
    const bv = ConfigSchema.parse({}).babyvision;
    expect(huggingFaceUrl(bv)).toBe(
      'https://huggingface.co/datasets/UnipatAI/BabyVision/resolve/849cbeea2b1d00ad334e9e1e2b49a1960c9ff3f3/data/train-00000-of-00001.parquet',
    );
    expect(huggingFaceUrl({ ...bv, endpoint: 'http://mirror.local:8080/' })).toMatch(/^http:\/\/mirror\.local:8080\/datasets\/UnipatAI/);
    expect(downloadPath('/d', bv)).toBe('/d/_downloads/UnipatAI__BabyVision/849cbeea2b1d00ad334e9e1e2b49a1960c9ff3f3/train-00000-of-00001.parquet');
  });
});

describe('downloadFile', () => {
  it('downloads into place and reports progress in plain lines off a terminal', async () => {
    const { body, dataDir } = setup();
    const srv = await serve(body);
    const dest = downloadPath(dataDir, source(srv.endpoint));
    const out = textSink();
    const result = await downloadFile(huggingFaceUrl(source(srv.endpoint)), dest, {
      logger: captureLogger().logger, progress: { stream: out, intervalMs: 0 },
    });
    expect(result).toEqual({ path: dest, resumedFromBytes: 0 });
    expect(readFileSync(dest).equals(body)).toBe(true);
    expect(existsSync(`${dest}.part`)).toBe(false);
    expect(out.text()).toMatch(/downloading train-00000-of-00001\.parquet: [\d.]+ MB \/ [\d.]+ MB \(100%\)\n$/);
  });

  it('keeps a .part when the connection drops and resumes it with a Range request', async () => {
    const { body, dataDir } = setup();
    const cut = Math.floor(body.length / 3);
    const srv = await serve(body, { dropAfterBytes: cut, dropTimes: 1 });
    const url = huggingFaceUrl(source(srv.endpoint));
    const dest = path.join(dataDir, 'x.parquet');
    const opts = { logger: captureLogger().logger, attempts: 1, progress: { stream: textSink() } };
    const err = await downloadFile(url, dest, opts).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InfraError);
    expect(existsSync(dest)).toBe(false);
    // Bytes still queued in the client when the socket closed may be lost, so at most `cut` arrived.
    const partial = statSync(`${dest}.part`).size;
    expect(partial).toBeGreaterThan(0);
    expect(partial).toBeLessThanOrEqual(cut);
    const result = await downloadFile(url, dest, opts);
    expect(result.resumedFromBytes).toBe(partial);
    expect(srv.ranges).toEqual([null, `bytes=${partial}-`]);
    expect(readFileSync(dest).equals(body)).toBe(true);
    expect(existsSync(`${dest}.part`)).toBe(false);
  });

  it('retries and resumes within one call', async () => {
    const { body, dataDir } = setup();
    const srv = await serve(body, { dropAfterBytes: 5000, dropTimes: 2 });
    const dest = path.join(dataDir, 'x.parquet');
    const log = captureLogger();
    await downloadFile(huggingFaceUrl(source(srv.endpoint)), dest, { logger: log.logger, retryDelayMs: 5, progress: { stream: textSink() } });
    expect(srv.ranges).toHaveLength(3);
    expect(srv.ranges[0]).toBeNull();
    expect(srv.ranges.slice(1).every((r) => /^bytes=[1-9]\d*-$/.test(r ?? ''))).toBe(true);
    expect(readFileSync(dest).equals(body)).toBe(true);
    expect(log.lines.filter((l) => l.msg === 'download interrupted; resuming')).toHaveLength(2);
  });

  it('starts over when the server ignores Range', async () => {
    const { body, dataDir } = setup();
    const srv = await serve(body, { dropAfterBytes: 4000, dropTimes: 1, ignoreRange: true });
    const dest = path.join(dataDir, 'x.parquet');
    await downloadFile(huggingFaceUrl(source(srv.endpoint)), dest, { logger: captureLogger().logger, retryDelayMs: 5, progress: { stream: textSink() } });
    expect(readFileSync(dest).equals(body)).toBe(true);
  });

  it('fails at once with a ConfigError on 404, naming the URL and what to check', async () => {
    const { body, dataDir } = setup(4);
    const srv = await serve(body);
    const err = await downloadFile(`${srv.endpoint}/datasets/Nobody/None/resolve/x/y.parquet`, path.join(dataDir, 'y'), {
      logger: captureLogger().logger, progress: { stream: textSink() },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/HTTP 404; check babyvision\.endpoint.*BABYVISION_PARQUET/);
    expect(srv.ranges).toHaveLength(1);
  });
});

/** A loopback port nothing listens on (bound, then closed): connecting to it is refused. */
async function closedPort(): Promise<number> {
  const s = createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** The error of a download, the download lines it logged, and the requests a server saw. */
async function failedDownload(url: string, dest: string) {
  const log = captureLogger();
  // A retry would wait 30 s: the test times out long before that if it retried at all.
  const err = await downloadFile(url, dest, { logger: log.logger, retryDelayMs: 30_000, progress: { stream: textSink() } }).catch((e: unknown) => e);
  return { err: err as Error, attempts: log.lines.filter((l) => l.msg === 'downloading').length, resumes: log.lines.filter((l) => l.msg === 'download interrupted; resuming').length };
}

describe('downloadFile when the server cannot be reached', () => {
  const hint = /download the parquet on a machine with internet access .*pass --parquet PATH or set BABYVISION_PARQUET/;

  it('stops at the first refused connection, naming the URL and how to work offline', async () => {
    const { dataDir } = setup(4);
    const url = huggingFaceUrl(source(`http://127.0.0.1:${await closedPort()}`));
    const { err, attempts, resumes } = await failedDownload(url, path.join(dataDir, 'x.parquet'));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.message).toContain(`cannot reach ${url}: connection refused (ECONNREFUSED)`);
    expect(err.message).toMatch(hint);
    expect([attempts, resumes]).toEqual([1, 0]);
  });

  it('stops at once when the host name does not resolve', async () => {
    // .invalid never resolves (RFC 6761): NXDOMAIN from a resolver, or no resolver at all.
    const url = huggingFaceUrl(source('http://babyvision-download-test.invalid'));
    const { err, attempts } = await failedDownload(url, path.join(createTmpDir(), 'x.parquet'));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.message).toMatch(/cannot reach http:\/\/babyvision-download-test\.invalid\/datasets\/.*: DNS lookup failed \((ENOTFOUND|EAI_AGAIN|EAI_FAIL|EAI_NONAME|EAI_NODATA)\)/);
    expect(err.message).toMatch(hint);
    expect(attempts).toBe(1);
  });

  it('stops at once when TLS fails, and says the partial download is kept', async () => {
    const { body, dataDir } = setup(4);
    const srv = await serve(body);
    const dest = path.join(dataDir, 'x.parquet');
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(`${dest}.part`, body.subarray(0, 100));
    // https:// to a plain-HTTP server: the TLS handshake fails before any request is made.
    const url = huggingFaceUrl(source(srv.endpoint.replace('http://', 'https://')));
    const { err, attempts } = await failedDownload(url, dest);
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.message).toMatch(/: TLS failed \(ERR_SSL_[A-Z_]+\)/);
    expect(err.message).toMatch(hint);
    expect(err.message).toContain(`the 100 bytes downloaded so far stay in ${dest}.part`);
    expect(attempts).toBe(1);
    expect(srv.ranges).toEqual([]);
  });

  it('still retries a server error, and suggests --parquet when the attempts run out', async () => {
    const { body, dataDir } = setup(4);
    const flaky = await serve(body, { failStatus: 503, failTimes: 1 });
    const log = captureLogger();
    const dest = path.join(dataDir, 'x.parquet');
    await downloadFile(huggingFaceUrl(source(flaky.endpoint)), dest, { logger: log.logger, retryDelayMs: 5, progress: { stream: textSink() } });
    expect(readFileSync(dest).equals(body)).toBe(true);
    expect(flaky.ranges).toHaveLength(2);
    expect(log.lines.filter((l) => l.msg === 'download interrupted; resuming')).toHaveLength(1);

    const down = await serve(body, { failStatus: 502, failTimes: 100 });
    const url = huggingFaceUrl(source(down.endpoint));
    const err = await downloadFile(url, path.join(dataDir, 'y.parquet'), { logger: log.logger, attempts: 3, retryDelayMs: 5, progress: { stream: textSink() } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InfraError);
    expect((err as Error).message).toContain(`download of ${url} failed: HTTP 502 (gave up after 3 attempts)`);
    expect((err as Error).message).toMatch(hint);
    expect(down.ranges).toHaveLength(3);
  });

  it('tells a request that never reached its server from one that did', () => {
    const wrapped = (cause: object) => Object.assign(new TypeError('fetch failed'), { cause });
    expect(networkFailure(wrapped(new AggregateError([Object.assign(new Error('x'), { code: 'ECONNREFUSED' })])))).toBe('connection refused (ECONNREFUSED)');
    expect(networkFailure(wrapped(Object.assign(new Error('x'), { code: 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY' })))).toBe('TLS failed (UNABLE_TO_GET_ISSUER_CERT_LOCALLY)');
    expect(networkFailure(wrapped(Object.assign(new Error('x'), { code: 'ECONNRESET' })))).toBeNull();
    expect(networkFailure(wrapped(Object.assign(new Error('x'), { code: 'UND_ERR_SOCKET' })))).toBeNull();
    expect(networkFailure(new Error('no code'))).toBeNull();
  });
});

describe('prepare without a local parquet', () => {
  it('downloads the pinned revision once, verifies its pin and prepares from it', async () => {
    const { fx, body, dataDir } = setup();
    const srv = await serve(body, { dropAfterBytes: 3000, dropTimes: 1 });
    const config = ConfigSchema.parse({ data_dir: dataDir, babyvision: { endpoint: srv.endpoint, sha256: fx.sha256 } });
    const opts = {
      benchmark: 'babyvision_opencode' as const, logger: captureLogger().logger, stderr: textSink(),
      download: { retryDelayMs: 5, progress: { stream: textSink() } },
    };
    const first = await prepareBenchmark(config, opts);
    expect(first.manifest).toMatchObject({ num_tasks: 120, source_sha256: fx.sha256 });
    expect(first.manifest.source_path).toBe(path.resolve(downloadPath(dataDir, config.babyvision)));
    const second = await prepareBenchmark(config, opts);
    expect(second.reused).toBe(true);
    expect(srv.ranges).toHaveLength(2); // one drop, one resume, nothing fetched the second time
    expect(srv.ranges[1]).toMatch(/^bytes=[1-9]\d*-$/);
  });

  it('says to delete a downloaded file whose hash does not match the pin', async () => {
    const { body, dataDir } = setup(8);
    const srv = await serve(body);
    const config = ConfigSchema.parse({ data_dir: dataDir, babyvision: { endpoint: srv.endpoint, sha256: '0'.repeat(64) } });
    const err = await prepareBenchmark(config, {
      benchmark: 'babyvision_opencode', logger: captureLogger().logger, stderr: textSink(), download: { progress: { stream: textSink() } },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataError);
    expect((err as Error).message).toMatch(/delete .*train-00000-of-00001\.parquet and run prepare again/);
  });
});

describe('download progress display', () => {
  it('draws a cli-progress bar on a terminal', () => {
    const out = textSink();
    const progress = createProgress({ label: 'bv.parquet', stream: Object.assign(out, { isTTY: true, columns: 120 }) });
    progress.start(2 * 1024 * 1024, 0);
    progress.update(1024 * 1024);
    progress.stop();
    expect(out.text()).toMatch(/downloading bv\.parquet \[.*\] \d+% \| [\d.]+ \/ 2\.0 MB/);
  });

  it('prints plain lines at most once per interval otherwise', () => {
    const out = textSink();
    const progress = createProgress({ label: 'bv.parquet', stream: out, intervalMs: 60_000 });
    progress.start(null, 0);
    for (let i = 1; i <= 100; i++) progress.update(i * 1000);
    progress.stop();
    expect(out.text().trim().split('\n')).toEqual(['downloading bv.parquet: 0.0 MB', 'downloading bv.parquet: 0.1 MB']);
  });
});
