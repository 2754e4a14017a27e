/**
 * Live progress of a run: a bar on a TTY (done/total, running, masked, accuracy so far, ETA), plain
 * periodic lines otherwise (logs and CI stay readable).
 */
import cliProgress from 'cli-progress';
import { accuracyOf, type TallyCounts } from '../shared/row-tally.ts';

/** What the progress line shows: the run's row tally, its size, and the rollouts running now. */
export interface ProgressCounts extends Pick<TallyCounts, 'done' | 'scored' | 'correct' | 'masked'> {
  total: number;
  running: number;
}

export function accuracyText(c: Pick<TallyCounts, 'scored' | 'correct'>): string {
  const a = accuracyOf(c);
  return a === null ? '-' : `${(100 * a).toFixed(1)}%`;
}

function etaText(c: ProgressCounts, startedAt: number, doneAtStart: number): string {
  const doneHere = c.done - doneAtStart;
  if (doneHere <= 0) return '?';
  const perRollout = (Date.now() - startedAt) / doneHere;
  const s = Math.round((perRollout * (c.total - c.done)) / 1000);
  return s >= 3600 ? `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m` : s >= 60 ? `${Math.floor(s / 60)}m${s % 60}s` : `${s}s`;
}

export interface ProgressView {
  update(c: ProgressCounts): void;
  stop(): void;
}

export function createProgressView(stream: NodeJS.WriteStream = process.stderr, intervalMs = 10_000): ProgressView {
  const startedAt = Date.now();
  let doneAtStart: number | null = null;
  if (stream.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        format: ' {bar} {value}/{total} | running {running} | masked {masked} | acc {acc} | ETA {remaining}',
        hideCursor: true,
        stream,
      },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    return {
      update(c) {
        doneAtStart ??= c.done;
        const payload = { running: c.running, masked: c.masked, acc: accuracyText(c), remaining: etaText(c, startedAt, doneAtStart) };
        if (!started) {
          bar.start(c.total, c.done, payload);
          started = true;
        } else bar.update(c.done, payload);
      },
      stop: () => bar.stop(),
    };
  }
  let last = 0;
  let lastDone = -1;
  return {
    update(c) {
      doneAtStart ??= c.done;
      const now = Date.now();
      if (now - last < intervalMs && c.done !== c.total) return;
      if (c.done === lastDone && now - last < intervalMs) return;
      last = now;
      lastDone = c.done;
      stream.write(
        `progress: ${c.done}/${c.total} done, ${c.running} running, ${c.masked} masked, accuracy ${accuracyText(c)}, ETA ${etaText(c, startedAt, doneAtStart)}\n`,
      );
    },
    stop() {},
  };
}
