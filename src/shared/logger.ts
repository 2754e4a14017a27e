/**
 * pino loggers: JSON lines by default, pretty on a TTY, API keys redacted both by field name and by
 * value (a key that leaks into a message string is still replaced).
 */
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

const REDACT_PATHS = [
  'apiKey', 'api_key', 'policy_api_key', 'authorization', 'Authorization',
  '*.apiKey', '*.api_key', '*.policy_api_key', '*.authorization', '*.Authorization',
  '*.*.api_key', '*.*.apiKey', 'headers.authorization', 'headers["OPEN-SANDBOX-API-KEY"]',
];

export interface LoggerOptions {
  level?: string;
  /** Secret values to scrub from every line, wherever they appear. */
  secrets?: readonly string[];
  /** Where lines go; default stderr (pretty when it is a TTY, unless `json`). */
  destination?: DestinationStream;
  /** JSON lines even on a terminal (`log_json`, `VCFLEET_LOG_JSON`). */
  json?: boolean;
  name?: string;
}

/** Replace every occurrence of each secret in a string. */
export function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join('***');
  return out;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const secrets = (options.secrets ?? []).filter((s) => s.length >= 4);
  const base = {
    level: options.level ?? 'info',
    name: options.name,
    redact: { paths: REDACT_PATHS, censor: '***' },
    // Secrets that leak into a message string are scrubbed from the finished line.
    ...(secrets.length ? { hooks: { streamWrite: (line: string) => scrub(line, secrets) } } : {}),
  };
  if (options.destination) return pino(base, options.destination);
  // Logs go to stderr; pretty only when a person watches it (log_json forces JSON).
  if (process.stderr.isTTY && !options.json) {
    return pino({
      ...base,
      transport: { target: 'pino-pretty', options: { colorize: true, destination: 2, ignore: 'pid,hostname' } },
    });
  }
  return pino(base, pino.destination({ fd: 2, sync: false }));
}
