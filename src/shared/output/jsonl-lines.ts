/**
 * The lines of a JSONL file, streamed: at most one line is held at a time, and a line longer than
 * its bound is never kept (its bytes are dropped up to the next newline and it comes back as
 * `tooLong`), so a hostile file cannot make its reader hold more than the bound.
 */
import { createReadStream } from 'node:fs';

export type JsonlLine = { lineNo: number; text: string } | { lineNo: number; tooLong: number };

/** Every non-empty line of `file` (1-based line numbers), each within `maxLineBytes`. */
export async function* jsonlLines(file: string, maxLineBytes: number): AsyncGenerator<JsonlLine> {
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
  for await (const chunk of createReadStream(file, { highWaterMark: 64 * 1024 }) as AsyncIterable<Buffer>) {
    let from = 0;
    for (let nl = chunk.indexOf(10, from); nl !== -1; nl = chunk.indexOf(10, from)) {
      take(chunk.subarray(from, nl));
      from = nl + 1;
      const line = end();
      if (line) yield line;
    }
    if (from < chunk.length) take(Buffer.from(chunk.subarray(from)));
  }
  const last = end();
  if (last) yield last;
}
