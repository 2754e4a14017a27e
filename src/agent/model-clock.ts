/**
 * The task timeout as the model's time: from the session's start, less the time the gateway held
 * its calls (`waitedMs`, read when the timer fires). It fires `onTimeout` once that time is spent,
 * re-arming itself for as long as waits push the end out.
 */
export class ModelClock {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly startedAt: number, private readonly budgetMs: number, private readonly waitedMs: () => number, private readonly onTimeout: () => void) {
    this.arm();
  }

  /** The model's time left, in ms. */
  leftMs(now = Date.now()): number {
    return this.startedAt + this.budgetMs + this.waitedMs() - now;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private arm(): void {
    if (this.stopped) return;
    const left = this.leftMs();
    if (left <= 0) {
      this.stopped = true;
      return this.onTimeout();
    }
    // Fires when the time left (as read now) runs out; a wait added since pushes the end out, and it re-arms.
    this.timer = setTimeout(() => this.arm(), Math.max(10, Math.min(left, 60_000)));
  }
}
