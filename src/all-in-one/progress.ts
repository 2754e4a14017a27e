/**
 * Live progress of a run: a bar on a TTY (done/total, running, masked, accuracy so far, ETA), plain
 * periodic lines otherwise (logs and CI stay readable).
 */
import { accuracyOf, type TallyCounts } from '../shared/output/tally.ts';
import type { PaceState } from '../shared/ports/telemetry.ts';
import { openTerminalScreen, TerminalScreen } from '../shared/text/terminal-screen.ts';

/** What the progress line shows: the run's row tally, its size, and the rollouts running now. */
export interface ProgressCounts extends Pick<TallyCounts, 'num_rollouts' | 'num_scored' | 'num_correct' | 'num_masked'> {
  total: number;
  running: number;
  /** Why this process takes no rollouts now (its host has no memory to spare); absent or null when it takes them. */
  held?: string | null;
  /** This process's pace against the policy endpoint; absent when it runs no sandbox-worker. */
  pace?: PaceState | null;
}

/**
 * The line's note on the policy endpoint's pace, once it pushed back or the sessions at once were
 * lowered: e.g. " | paced: 2/4 at once, 7x 429 in 1 min, 35% waiting".
 */
export function paceText(p: PaceState | null | undefined): string {
  if (!p || (p.pushbacksLastMin === 0 && p.concurrency >= p.cap && p.waitShare < 0.005)) return '';
  return ` | paced: ${p.concurrency}/${p.cap} at once, ${p.pushbacksLastMin}x 429 in 1 min, ${(100 * p.waitShare).toFixed(0)}% waiting`;
}

/** The line's note on a hold: short on the bar, whole on a log line. */
function heldText(c: ProgressCounts): string {
  return c.held ? ' | HELD: no memory for another sandbox' : '';
}

export function accuracyText(c: Pick<TallyCounts, 'num_scored' | 'num_correct'>): string {
  const a = accuracyOf(c);
  return a === null ? '-' : `${(100 * a).toFixed(1)}%`;
}

function duration(s: number): string {
  return s >= 3600 ? `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m` : s >= 60 ? `${Math.floor(s / 60)}m${s % 60}s` : `${s}s`;
}

/**
 * The ETA from recent throughput (the rows of the last `windowMs`, so a run that slows down says so)
 * and "stalled" when no row came for `stalledAfterMs`.
 */
class Eta {
  private readonly samples: Array<{ at: number; done: number }> = [];

  constructor(private readonly windowMs = 5 * 60_000, private readonly stalledAfterMs = 3 * 60_000, private readonly now = () => Date.now()) {}

  text(c: Pick<ProgressCounts, 'num_rollouts' | 'total'>): string {
    const now = this.now();
    const last = this.samples.at(-1);
    if (!last || last.done !== c.num_rollouts) this.samples.push({ at: now, done: c.num_rollouts });
    while (this.samples.length > 2 && now - this.samples[1].at > this.windowMs) this.samples.shift();
    if (c.num_rollouts >= c.total) return '0s';
    const latest = this.samples.at(-1)!;
    const first = this.samples[0];
    if (this.samples.length > 1 && now - latest.at > this.stalledAfterMs) return `stalled (no row for ${duration(Math.round((now - latest.at) / 1000))})`;
    if (latest.done === first.done) return '?';
    const perRow = (latest.at - first.at) / (latest.done - first.done);
    return duration(Math.round((perRow * (c.total - c.num_rollouts)) / 1000));
  }
}

export interface ProgressView {
  update(c: ProgressCounts): void;
  stop(): void;
}

export function createProgressView(stream: NodeJS.WriteStream = process.stderr, intervalMs = 10_000): ProgressView {
  const eta = new Eta();
  if (stream.isTTY) {
    // The bar is the screen's last line; log lines print above it (shared/text/terminal-screen.ts).
    const screen = stream === process.stderr ? openTerminalScreen(stream) : new TerminalScreen(stream);
    return {
      update(c) {
        const filled = c.total > 0 ? Math.round((20 * Math.min(c.num_rollouts, c.total)) / c.total) : 0;
        const bar = `${'█'.repeat(filled)}${'░'.repeat(20 - filled)}`;
        screen.setBar(` ${bar} ${c.num_rollouts}/${c.total} | running ${c.running} | masked ${c.num_masked} | acc ${accuracyText(c)} | ETA ${eta.text(c)}${paceText(c.pace)}${heldText(c)}`);
      },
      stop: () => screen.endBar(),
    };
  }
  let last = 0;
  let lastDone = -1;
  let lastHeld: string | null = null;
  return {
    update(c) {
      const remaining = eta.text(c);
      const now = Date.now();
      const held = c.held ?? null;
      const heldChanged = held !== lastHeld;
      lastHeld = held;
      if (!heldChanged && now - last < intervalMs && c.num_rollouts !== c.total) return;
      if (!heldChanged && c.num_rollouts === lastDone && now - last < intervalMs) return;
      last = now;
      lastDone = c.num_rollouts;
      stream.write(
        `progress: ${c.num_rollouts}/${c.total} done, ${c.running} running, ${c.num_masked} masked, accuracy ${accuracyText(c)}, ETA ${remaining}${paceText(c.pace).replace(' | ', '; ')}${held ? `; held: ${held}` : ''}\n`,
      );
    },
    stop() {},
  };
}
