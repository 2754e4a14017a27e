/**
 * A parquet file opened for reading: a file-backed AsyncBuffer (only the byte ranges hyparquet asks
 * for are read), checked for the `PAR1` magic at both ends, with its footer metadata parsed.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { parquetMetadataAsync, type AsyncBuffer, type FileMetaData } from 'hyparquet';
import { DataError, errorMessage } from '../shared/errors.ts';

const MAGIC = 'PAR1';
/** Smallest possible parquet file: magic, 4-byte footer length, magic. */
const MIN_PARQUET_BYTES = 12;

export interface ParquetSource {
  /** The file path, as given; used in every error message. */
  path: string;
  file: AsyncBuffer;
  metadata: FileMetaData;
  /** Close the file handle. Safe to call twice. */
  close(): Promise<void>;
}

/** An AsyncBuffer that reads slices of an open file on demand. */
export function fileAsyncBuffer(handle: FileHandle, byteLength: number): AsyncBuffer {
  return {
    byteLength,
    async slice(start: number, end?: number): Promise<ArrayBuffer> {
      const stop = Math.min(end ?? byteLength, byteLength);
      const length = Math.max(0, stop - start);
      const out = new Uint8Array(length);
      let done = 0;
      while (done < length) {
        const { bytesRead } = await handle.read(out, done, length - done, start + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      return out.buffer;
    },
  };
}

async function readAscii(file: AsyncBuffer, start: number, end: number): Promise<string> {
  return Buffer.from(await file.slice(start, end)).toString('latin1');
}

async function openHandle(filePath: string): Promise<FileHandle> {
  try {
    return await open(filePath, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new DataError(`parquet file ${filePath} does not exist`);
    throw new DataError(`cannot open parquet file ${filePath}: ${errorMessage(err)}`);
  }
}

/** Check both magic markers; tell a non-parquet file from a truncated one. */
async function checkMagic(filePath: string, file: AsyncBuffer): Promise<void> {
  const size = file.byteLength;
  const head = size >= 4 ? await readAscii(file, 0, 4) : '';
  if (head !== MAGIC) {
    throw new DataError(`${filePath} is not a parquet file (it does not start with "PAR1"; ${size} bytes)`);
  }
  const tail = size >= MIN_PARQUET_BYTES ? await readAscii(file, size - 4, size) : '';
  if (tail !== MAGIC) {
    throw new DataError(
      `parquet file ${filePath} is truncated or damaged (no "PAR1" footer at its end; ${size} bytes): ` +
        'download or copy it again',
    );
  }
}

/** Open a parquet file and parse its footer. Throws DataError naming the file on any problem. */
export async function openParquetSource(filePath: string): Promise<ParquetSource> {
  const handle = await openHandle(filePath);
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await handle.close();
  };
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw new DataError(`parquet file ${filePath} is not a regular file`);
    const size = stats.size;
    const file = fileAsyncBuffer(handle, size);
    await checkMagic(filePath, file);
    let metadata: FileMetaData;
    try {
      metadata = await parquetMetadataAsync(file);
    } catch (err) {
      throw new DataError(`parquet file ${filePath} has an unreadable footer (${errorMessage(err)}): it may be truncated or damaged`);
    }
    return { path: filePath, file, metadata, close };
  } catch (err) {
    await close();
    throw err;
  }
}
