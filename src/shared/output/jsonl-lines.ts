/**
 * The one line reader of JSONL files of rows (row-file.ts, `vcfleet export`): at most one line is
 * held at a time, and a line longer than its bound is never kept (its bytes are dropped up to the
 * next newline and it comes back as `tooLong`), so a hostile file cannot make its reader hold more
 * than the bound. It reads 64 KiB at a time synchronously, so the synchronous readers of a row file
 * (the viewer, `vcfleet metrics`, the results consumer) and the streamed export share it.
 */
import { closeSync, openSync, readSync } from 'node:fs';

export type JsonlLine = { lineNo: number; text: string } | { lineNo: number; tooLong: number };

/** How the file ended. */
export interface JsonlEnd {
  /** The file does not end with a newline: its last line was being written or was cut. */
  cutTail: boolean;
}

const CHUNK_BYTES = 64 * 1024;

/**
 * Every non-empty line of `file` (1-based line numbers), each within `maxLineBytes` (default: no
 * bound); returns how the file ended. Read errors are thrown as they come (the file is closed).
 */
export function* jsonlLines(file: string, maxLineBytes = Number.POSITIVE_INFINITY): Generator<JsonlLine, JsonlEnd> {
  let parts: Buffer[] = [];
  let held = 0;
  let dropped = 0;
  let lineNo = 0;
  const end = (): JsonlLine | null => {
    lineNo++;
    const line: JsonlLine | null = dropped > 0 ? { lineNo, tooLong: dropped + held } : held > 0 ? { lineNo, text: Buffer.concat(parts, held).toString('utf8') } : null;
    parts = [];
    held = 0;
    dropped = 0;
    return line && 'text' in line && !line.text.trim() ? null : line;
  };
  const take = (chunk: Buffer) => {
    if (dropped > 0) dropped += chunk.length;
    else if (held + chunk.length > maxLineBytes) {
      dropped = held + chunk.length;
      parts = [];
      held = 0;
    } else {
      parts.push(chunk);
      held += chunk.length;
    }
  };
  const fd = openSync(file, 'r');
  try {
    const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
    let lastByte: number | null = null;
    for (let n = readSync(fd, buffer, 0, CHUNK_BYTES, null); n > 0; n = readSync(fd, buffer, 0, CHUNK_BYTES, null)) {
      const chunk = buffer.subarray(0, n);
      lastByte = chunk[n - 1];
      let from = 0;
      for (let nl = chunk.indexOf(10, from); nl !== -1; nl = chunk.indexOf(10, from)) {
        take(chunk.subarray(from, nl));
        from = nl + 1;
        const line = end();
        if (line) yield line;
      }
      // The buffer is read into again: a line's start is kept as a copy.
      if (from < chunk.length) take(Buffer.from(chunk.subarray(from)));
    }
    const last = end();
    if (last) yield last;
    return { cutTail: lastByte !== null && lastByte !== 10 };
  } finally {
    closeSync(fd);
  }
}
