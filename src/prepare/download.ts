/**
 * Download of the pinned BabyVision parquet from Hugging Face (or any mirror with the same URL
 * layout): resumable through HTTP Range requests into a `.part` file, renamed into place only when
 * complete, so a finished file is never partial.
 */
import { mkdir, open, rename, stat, truncate } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../shared/config/load.ts';
import { ConfigError, InfraError, errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { createProgress, type Progress, type ProgressOptions } from './download-progress.ts';
import { networkFailure } from './network-failure.ts';
import { setTimeout as sleep } from 'node:timers/promises';

/** `${endpoint}/datasets/${hf_repo}/resolve/${revision}/${file}`. */
export function huggingFaceUrl(source: Config['babyvision']): string {
  const endpoint = source.endpoint.replace(/\/+$/, '');
  return `${endpoint}/datasets/${source.hf_repo}/resolve/${source.revision}/${source.file}`;
}

/** Where the download lands: `<data_dir>/_downloads/<repo>/<revision>/<file name>`. */
export function downloadPath(dataDir: string, source: Config['babyvision']): string {
  const repo = source.hf_repo.replace(/[^A-Za-z0-9_.-]+/g, '__');
  return path.join(dataDir, '_downloads', repo, source.revision, path.basename(source.file));
}

export interface DownloadOptions {
  logger: Logger;
  /**
   * Attempts before giving up on server errors and connections cut mid-download; each one resumes
   * where the last stopped. Default 5. A server that cannot be reached at all is not retried.
   */
  attempts?: number;
  /** Wait between attempts, in milliseconds; default 2000. */
  retryDelayMs?: number;
  /** Progress display options (stream, interval); the label defaults to the file name. */
  progress?: Partial<ProgressOptions>;
}

export interface DownloadResult {
  path: string;
  /** Bytes already present before this call (0: a fresh download; the file size: nothing fetched). */
  resumedFromBytes: number;
}

async function fileSize(p: string): Promise<number | null> {
  return stat(p).then((s) => s.size, () => null);
}

/** Total size from `Content-Range: bytes a-b/total` or `bytes *\/total`. */
export function contentRangeTotal(header: string | null): number | null {
  const m = header ? /\/(\d+)\s*$/.exec(header) : null;
  return m ? Number(m[1]) : null;
}

function contentRangeStart(header: string | null): number | null {
  const m = header ? /^bytes\s+(\d+)-/.exec(header) : null;
  return m ? Number(m[1]) : null;
}

/** What to do when the pinned parquet cannot be downloaded here. */
export const OFFLINE_HINT =
  'download the parquet on a machine with internet access (from that URL), copy it here, and pass --parquet PATH or set BABYVISION_PARQUET';

/** Where a partial download stands, for messages (empty when nothing was kept). */
function keptNote(part: string, bytes: number): string {
  return bytes > 0 ? `; the ${bytes} bytes downloaded so far stay in ${part}, and the next prepare resumes from them` : '';
}

/**
 * The request for the rest of the file. A request that never reached the server (no DNS, refused,
 * unreachable, TLS) fails at once with a ConfigError saying how to work offline: retrying cannot help.
 * Anything else is an InfraError, retried.
 */
async function request(url: string, part: string, offset: number): Promise<Response> {
  try {
    return await fetch(url, { headers: offset > 0 ? { Range: `bytes=${offset}-` } : {}, redirect: 'follow' });
  } catch (err) {
    const unreachable = networkFailure(err);
    if (unreachable) {
      throw new ConfigError(`cannot reach ${url}: ${unreachable}; this machine looks offline or cut off from it: ${OFFLINE_HINT}${keptNote(part, offset)}`, { cause: err });
    }
    throw new InfraError(`cannot reach ${url}: ${errorMessage(err)}`, { cause: err });
  }
}

/** Decide where writing starts from the response; null when the `.part` file is already complete. */
async function startOffset(res: Response, url: string, part: string, offset: number): Promise<number | null> {
  if (res.status === 416 && offset > 0) {
    if (contentRangeTotal(res.headers.get('content-range')) === offset) return null;
    await truncate(part, 0);
    throw new InfraError(`server refused to resume ${url} at byte ${offset}; starting over`);
  }
  if (res.status === 206) {
    if (contentRangeStart(res.headers.get('content-range')) !== offset) {
      await truncate(part, 0);
      throw new InfraError(`server resumed ${url} at the wrong byte; starting over`);
    }
    return offset;
  }
  if (res.status === 200) return 0;
  const hint = 'check babyvision.endpoint, hf_repo, revision and file, or pass --parquet PATH (or set BABYVISION_PARQUET) to a local copy';
  if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
    throw new ConfigError(`download of ${url} failed: HTTP ${res.status}; ${hint}`);
  }
  throw new InfraError(`download of ${url} failed: HTTP ${res.status}`);
}

function expectedTotal(res: Response, start: number): number | null {
  if (res.status === 206) return contentRangeTotal(res.headers.get('content-range'));
  const length = res.headers.get('content-length');
  return length === null ? null : start + Number(length);
}

/** One attempt: append the response body to `part` from wherever it stands. */
async function attempt(url: string, part: string, progress: Progress): Promise<void> {
  const offset = (await fileSize(part)) ?? 0;
  const res = await request(url, part, offset);
  const start = await startOffset(res, url, part, offset);
  if (start === null) return;
  const total = expectedTotal(res, start);
  const handle = await open(part, start === 0 ? 'w' : 'a');
  let done = start;
  progress.start(total, done);
  try {
    if (!res.body) throw new InfraError(`download of ${url}: empty response body`);
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      await handle.write(chunk);
      done += chunk.length;
      progress.update(done);
    }
  } catch (err) {
    if (err instanceof InfraError) throw err;
    throw new InfraError(`download of ${url} broke off at byte ${done}: ${errorMessage(err)}`, { cause: err });
  } finally {
    progress.stop();
    await handle.close();
  }
  if (total !== null && done !== total) {
    throw new InfraError(`download of ${url} ended at byte ${done} of ${total}`);
  }
}

/**
 * Download `url` to `dest` unless `dest` exists. Resumes a `.part` left by an earlier attempt or
 * run; retries InfraErrors (server errors, a connection cut mid-body) `attempts` times; renames the
 * `.part` to `dest` only once complete. A server that cannot be reached at all (no DNS, refused,
 * unreachable, TLS) is a ConfigError at once, naming the URL and `--parquet` / `BABYVISION_PARQUET`.
 */
export async function downloadFile(url: string, dest: string, options: DownloadOptions): Promise<DownloadResult> {
  const existing = await fileSize(dest);
  if (existing !== null) return { path: dest, resumedFromBytes: existing };
  await mkdir(path.dirname(dest), { recursive: true });
  const part = `${dest}.part`;
  const resumedFromBytes = (await fileSize(part)) ?? 0;
  const attempts = options.attempts ?? 5;
  const progress = createProgress({ label: path.basename(dest), ...options.progress });
  for (let i = 1; ; i++) {
    const before = (await fileSize(part)) ?? 0;
    options.logger.info({ url, dest, attempt: i, resume_from_bytes: before }, 'downloading');
    try {
      await attempt(url, part, progress);
      await rename(part, dest);
      return { path: dest, resumedFromBytes };
    } catch (err) {
      if (!(err instanceof InfraError)) throw err;
      if (i >= attempts) {
        const kept = (await fileSize(part)) ?? 0;
        throw new InfraError(`${err.message} (gave up after ${attempts} attempts${keptNote(part, kept)}); or ${OFFLINE_HINT}`, { cause: err });
      }
      options.logger.warn({ url, attempt: i, err: errorMessage(err) }, 'download interrupted; resuming');
      await sleep(options.retryDelayMs ?? 2000);
    }
  }
}
