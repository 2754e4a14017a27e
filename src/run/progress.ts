/**
 * Live progress of a run: a bar on a TTY (done/total, running, masked, accuracy so far, ETA), plain
 * periodic lines otherwise (logs and CI stay readable).
 */
import cliProgress from 'cli-progress';
import type { Row } from '../shared/rows.ts';

export interface ProgressCounts {
  total: number;
  done: number;
  scored: number;
  correct: number;
  masked: number;
  running: number;
}

type Outcome = 'masked' | 'correct' | 'wrong';

export class RunTally {
  readonly counts: ProgressCounts;
  /** Each rollout's outcome, so that a replaced row (a rejudge, a retry) is counted once. */
  private readonly seen = new Map<string, Outcome>();
  constructor(total: number) {
    this.counts = { total, done: 0, scored: 0, correct: 0, masked: 0, running: 0 };
  }

  /** Count a committed row (a replaced row is uncounted first). */
  add(row: Row): void {
    const old = this.seen.get(row.rollout_id);
    if (old) this.apply(old, -1);
    const now: Outcome = row.failure_kind !== null ? 'masked' : row.reward === 1 ? 'correct' : 'wrong';
    this.seen.set(row.rollout_id, now);
    this.apply(now, 1);
  }

  private apply(outcome: Outcome, sign: 1 | -1): void {
    this.counts.done += sign;
    if (outcome === 'masked') this.counts.masked += sign;
    else {
      this.counts.scored += sign;
      if (outcome === 'correct') this.counts.correct += sign;
    }
  }
}

export function accuracyText(c: ProgressCounts): string {
  return c.scored === 0 ? '-' : `${((100 * c.correct) / c.scored).toFixed(1)}%`;
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
