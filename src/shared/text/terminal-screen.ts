/**
 * One owner of a terminal's screen while a progress bar is on it: the bar is the last line, and
 * every other line (a log line, a notice) is printed above it (the bar line cleared, the line
 * written, the bar drawn again), so nothing is ever glued into the bar. A warning seen before is
 * not printed again while the bar shows: it is counted on the bar with its reason. When the bar
 * ends its line is cleared, so what follows (the summary) starts on a clean line. Off a terminal
 * nothing of this is used: lines are written as they come.
 */
import type { DestinationStream } from 'pino';
import { prettyFactory } from 'pino-pretty';

const CLEAR_LINE = '\r\x1b[2K';

export class TerminalScreen {
  private bar = '';
  private folded = 0;
  private lastFolded = '';
  private readonly seen = new Set<string>();

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {}

  /** Show `text` as the bar (one line, cut to the terminal's width). */
  setBar(text: string): void {
    this.bar = text;
    this.draw();
  }

  /** Print `text` (one or more lines) above the bar. */
  print(text: string): void {
    this.stream.write(`${CLEAR_LINE}${text.endsWith('\n') ? text : `${text}\n`}`);
    if (this.bar) this.draw();
  }

  /** A warning: printed the first time its `reason` is seen; while the bar shows, a repeat is counted on it instead. */
  warn(reason: string, text: string): void {
    if (this.bar && this.seen.has(reason)) {
      this.folded++;
      this.lastFolded = reason;
      this.draw();
      return;
    }
    this.seen.add(reason);
    this.print(text);
  }

  /** Clear the bar's line for good (what follows starts on a clean line), saying how many warnings were folded. */
  endBar(): void {
    if (!this.bar) return;
    this.bar = '';
    this.stream.write(CLEAR_LINE);
    if (this.folded > 0) this.stream.write(`(${this.folded} repeated warning(s) not printed again; the last: ${this.lastFolded})\n`);
    this.folded = 0;
  }

  private draw(): void {
    if (!this.bar) return;
    const note = this.folded > 0 ? ` | ${this.folded} warnings (last: ${this.lastFolded})` : '';
    // Room at the end for what the terminal echoes (^C), which would wrap a full line.
    const width = Math.max(20, (this.stream.columns || 100) - 4);
    const line = `${this.bar}${note}`;
    this.stream.write(`${CLEAR_LINE}${line.length > width ? `${line.slice(0, width - 1)}…` : line}`);
  }
}

let active: TerminalScreen | null = null;

/** The screen of this process's terminal, once a command made one (null off a terminal). */
export function terminalScreen(): TerminalScreen | null {
  return active;
}

/** Make the process's terminal screen (stderr); what prints to the terminal goes through it from now on. */
export function openTerminalScreen(stream: NodeJS.WriteStream = process.stderr): TerminalScreen {
  active ??= new TerminalScreen(stream);
  return active;
}

/** Write to stderr, above the bar when one shows. */
export function printAboveBar(text: string): void {
  if (active) active.print(text);
  else process.stderr.write(text);
}

/** A pino destination that prints each line, pretty and on one line, through the screen; warnings fold. */
export function screenDestination(screen: TerminalScreen): DestinationStream {
  const pretty = prettyFactory({ colorize: true, singleLine: true, ignore: 'pid,hostname,name' });
  return {
    write(line: string) {
      let entry: { level?: number; msg?: unknown };
      try {
        entry = JSON.parse(line) as { level?: number; msg?: unknown };
      } catch {
        screen.print(line);
        return;
      }
      const text = pretty(entry).trimEnd();
      if (entry.level === 40) screen.warn(String(entry.msg ?? ''), text);
      else screen.print(text);
    },
  };
}
