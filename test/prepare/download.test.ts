import { once } from 'node:events';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/shared/config.ts';
import { ConfigError, DataError, InfraError } from '../../src/shared/errors.ts';
import { downloadFile, downloadPath, huggingFaceUrl } from '../../src/prepare/download.ts';
import { createProgress } from '../../src/prepare/download-progress.ts';
import { prepareBenchmark } from '../../src/prepare/prepare.ts';
import { writeFixtureParquet } from '../helpers/fixture-parquet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { captureLogger, textSink } from './log-capture.ts';

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
  const server = createServer((req, res) => {
    ranges.push(req.headers.range ?? null);
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
