/**
 * pino loggers: pretty on a TTY; piped or redirected, one compact human line per event (its level,
 * message and fields, each field cut short); JSON lines with `log_json` (`VCFLEET_LOG_JSON=1`), for
 * log shippers. API keys redacted both by field name and by value (a key that leaks into a message
 * string is still replaced).
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
  /** JSON lines, on a terminal or not (`log_json`, `VCFLEET_LOG_JSON`); default: pretty on a terminal, compact lines otherwise. */
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
  if (options.json) return pino(base, pino.destination({ fd: 2, sync: false }));
  return pino(base, compactDestination((text) => process.stderr.write(text)));
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const NOT_FIELDS = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg', 'v']);
/** Longest value of one field, and longest line, in characters (the rest is cut, marked `…`). */
const FIELD_MAX = 100;
const LINE_MAX = 400;

const cut = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** One pino JSON line as a compact human line: `12:00:01 WARN message  key=value …`. A line that is not JSON passes unchanged. */
export function compactLine(json: string): string {
  let event: Record<string, unknown>;
  try {
    event = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const time = typeof event.time === 'number' ? new Date(event.time).toISOString().slice(11, 19) : '';
  const level = LEVELS[event.level as number] ?? String(event.level ?? '');
  const fields = Object.entries(event)
    .filter(([k, v]) => !NOT_FIELDS.has(k) && v !== undefined)
    .map(([k, v]) => `${k}=${cut(typeof v === 'string' ? (/\s/.test(v) ? JSON.stringify(v) : v) : JSON.stringify(v), FIELD_MAX)}`);
  const line = [time, level, String(event.msg ?? '')].filter(Boolean).join(' ');
  return `${cut(fields.length ? `${line}  ${fields.join(' ')}` : line, LINE_MAX)}\n`;
}

/** A pino destination that writes each event as a compact line (`compactLine`) to `write`. */
export function compactDestination(write: (text: string) => unknown): DestinationStream {
  return { write: (line: string) => void write(compactLine(line)) };
}
