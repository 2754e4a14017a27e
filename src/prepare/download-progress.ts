/**
 * Progress of a byte transfer: a cli-progress bar when the stream is a terminal, otherwise a plain
 * line at most every `intervalMs` (log files and CI output stay readable).
 */
import cliProgress from 'cli-progress';

/** Where progress is written: process.stderr, or anything with `write` (tests). */
export interface ProgressStream {
  write(text: string): unknown;
  /** True on a terminal: draw a bar instead of plain lines. */
  isTTY?: boolean;
}

export interface ProgressOptions {
  /** What is being transferred, e.g. the file name. */
  label: string;
  /** Where progress goes; default process.stderr. */
  stream?: ProgressStream;
  /** Shortest time between two plain lines, in milliseconds; default 5000. */
  intervalMs?: number;
}

export interface Progress {
  /** Total size in bytes, once known (null: unknown). */
  start(totalBytes: number | null, doneBytes: number): void;
  update(doneBytes: number): void;
  stop(): void;
}

const MB = 1024 * 1024;

export function formatBytes(bytes: number): string {
  return `${(bytes / MB).toFixed(1)} MB`;
}

/** One plain progress line: `downloading x: 12.0 / 51.0 MB (23%)`. */
export function progressLine(label: string, done: number, total: number | null): string {
  if (total === null || total <= 0) return `downloading ${label}: ${formatBytes(done)}`;
  const pct = Math.floor((done / total) * 100);
  return `downloading ${label}: ${formatBytes(done)} / ${formatBytes(total)} (${pct}%)`;
}

function barProgress(label: string, stream: ProgressStream): Progress {
  const bar = new cliProgress.SingleBar(
    {
      stream: stream as NodeJS.WritableStream,
      format: `downloading ${label} [{bar}] {percentage}% | {doneMB} / {totalMB} MB | eta {eta}s`,
      hideCursor: true,
    },
    cliProgress.Presets.shades_classic,
  );
  const payload = (done: number, total: number) => ({
    doneMB: (done / MB).toFixed(1),
    totalMB: (total / MB).toFixed(1),
  });
  let total = 0;
  return {
    start(totalBytes, doneBytes) {
      total = totalBytes ?? 0;
      bar.start(total, doneBytes, payload(doneBytes, total));
    },
    update(doneBytes) {
      bar.update(doneBytes, payload(doneBytes, total));
    },
    stop: () => bar.stop(),
  };
}

function lineProgress(label: string, stream: ProgressStream, intervalMs: number): Progress {
  let total: number | null = null;
  let last = 0;
  let done = 0;
  const print = () => {
    last = Date.now();
    stream.write(`${progressLine(label, done, total)}\n`);
  };
  return {
    start(totalBytes, doneBytes) {
      total = totalBytes;
      done = doneBytes;
      print();
    },
    update(doneBytes) {
      done = doneBytes;
      if (Date.now() - last >= intervalMs) print();
    },
    stop: () => print(),
  };
}

export function createProgress(options: ProgressOptions): Progress {
  const stream = options.stream ?? process.stderr;
  if (stream.isTTY) return barProgress(options.label, stream);
  return lineProgress(options.label, stream, options.intervalMs ?? 5000);
}
