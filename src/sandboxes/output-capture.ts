/**
 * Output handling shared by the providers: split a byte stream into lines without a length cap, and
 * keep a bounded tail of what a command printed.
 */

/**
 * Splits a byte stream into `\n`-terminated lines. Bytes are decoded per complete line, so a UTF-8
 * character split across chunks is never mangled; a line may be megabytes long.
 */
export class LineSplitter {
  private pending: Buffer[] = [];

  constructor(private readonly onLine: (line: string) => void) {}

  push(chunk: Buffer): void {
    let start = 0;
    let idx: number;
    while ((idx = chunk.indexOf(10, start)) !== -1) {
      this.pending.push(chunk.subarray(start, idx));
      this.emit();
      start = idx + 1;
    }
    if (start < chunk.length) this.pending.push(chunk.subarray(start));
  }

  /** Emit the last line if it had no trailing newline. */
  flush(): void {
    if (this.pending.length > 0) this.emit();
  }

  private emit(): void {
    const line = Buffer.concat(this.pending).toString('utf8');
    this.pending = [];
    this.onLine(line);
  }
}

/** Keeps the last `maxBytes` bytes written to it (everything when the output is smaller). */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  /** Bytes dropped from the front because the cap was reached. */
  droppedBytes = 0;

  constructor(private readonly maxBytes: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size - (this.chunks[0]?.length ?? 0) >= this.maxBytes && this.chunks.length > 1) {
      const first = this.chunks.shift()!;
      this.size -= first.length;
      this.droppedBytes += first.length;
    }
  }

  toString(): string {
    const all = Buffer.concat(this.chunks);
    const excess = Math.max(0, all.length - this.maxBytes);
    // Cutting may split a UTF-8 character at the start; the replacement char there is acceptable.
    return all.subarray(excess).toString('utf8');
  }
}

/** Default cap of `stdout` and `stderr` kept in an ExecResult: 16 MiB each. */
export const DEFAULT_MAX_CAPTURE_BYTES = 16 * 1024 * 1024;
