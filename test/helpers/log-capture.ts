/** A pino logger whose JSON lines land in an array, for tests that read what was logged. */
import { pino, type Logger } from 'pino';

export interface CapturedLogger {
  logger: Logger;
  lines: Array<Record<string, unknown>>;
}

export function captureLogger(): CapturedLogger {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
}

/** A text sink that keeps what was written (stands in for process.stderr). */
export function textSink(): { write(text: string): boolean; text(): string } {
  const parts: string[] = [];
  return { write: (t: string) => parts.push(t) > 0, text: () => parts.join('') };
}
