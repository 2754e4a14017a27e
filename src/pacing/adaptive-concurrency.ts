/**
 * How many sessions a sandbox-worker runs at once against its policy endpoint, adapted to what the
 * endpoint sustains: additive increase (one more session per `limit` clean calls) and
 * multiplicative decrease (by DECREASE, at most once per COOLDOWN_MS) when the endpoint pushes
 * back (429, 503 with Retry-After). Bounded by 1 and the configured cap. Pure: the caller applies
 * the limit (a lower limit only stops new sessions from starting; running ones are never cut).
 *
 * Rising latency (per output token, past LATENCY_FACTOR times the best seen) lowers the limit too,
 * but only where that costs no throughput: a saturated server answers more slowly the more calls it
 * has, yet with fewer sessions it idles while each session runs its tools between calls. So the
 * throughput (output tokens per second) is measured at each limit the sessions actually filled, and
 * the latency rule steps down only to a limit not yet measured (to find out) or measured at no less
 * than KEEP of the current one's; a limit found slower is a floor the latency rule keeps to for
 * FLOOR_MS. The latency rule also acts only on samples taken since the last change, once the
 * running sessions are down to the limit: sessions started under a higher limit keep the latency
 * high until they end, and must not lower the limit again and again.
 */

const DECREASE = 0.75;
const COOLDOWN_MS = 5_000;
const LATENCY_FACTOR = 2.5;
/** Weight of a new latency sample in the moving average. */
const ALPHA = 0.2;
/** Latency samples (since the last change, at the limit) before the latency signal is trusted. */
const MIN_SAMPLES = 5;
/** A throughput measurement at one limit spans at least this long and this many calls. */
const WINDOW_MS = 20_000;
const WINDOW_CALLS = 4;
/** A lower limit is as good when its throughput is at least this share of the current one's. */
const KEEP = 0.9;
/** How long a limit found slower stays a floor of the latency rule (the server may change). */
const FLOOR_MS = 5 * 60_000;

interface Window {
  level: number;
  startedAt: number;
  tokens: number;
  calls: number;
}

export class AdaptiveConcurrency {
  private limit: number;
  private lastDecrease = -Infinity;
  private avg: number | null = null;
  private best = Infinity;
  private samples = 0;
  /** Output tokens per second measured at each limit the sessions filled (the latest window). */
  private readonly rates = new Map<number, number>();
  private window: Window | null = null;
  private floor = { level: 1, until: -Infinity };

  constructor(private readonly cap: number, private readonly now: () => number = Date.now) {
    this.limit = cap;
  }

  /** Sessions to run at once now. */
  get current(): number {
    return Math.max(1, Math.min(this.cap, Math.floor(this.limit)));
  }

  /** Throughput measured at `level` sessions (tokens/s), if any. */
  rateAt(level: number): number | undefined {
    return this.rates.get(level);
  }

  /** The endpoint pushed back; true when the limit changed. */
  pushedBack(): boolean {
    return this.decrease(this.limit * DECREASE);
  }

  /**
   * A call came back clean after `latencyMs` with `outputTokens` tokens while `running` sessions ran
   * (default: as many as the limit); true when the limit changed.
   */
  clean(latencyMs: number, outputTokens: number, running = this.current): boolean {
    const level = this.current;
    const filled = running >= level;
    this.measure(level, filled, outputTokens);
    // Samples of sessions started under a higher limit say nothing about this one.
    if (running <= level) {
      const perToken = latencyMs / Math.max(1, outputTokens);
      this.avg = this.avg === null ? perToken : this.avg + ALPHA * (perToken - this.avg);
      this.samples++;
      // The best is forgotten slowly, so an endpoint that got slower for good is the new normal in time.
      this.best = Math.min(this.best * 1.0005, this.avg);
    }
    if (this.samples >= MIN_SAMPLES && this.avg! > LATENCY_FACTOR * this.best) {
      const target = Math.max(1, Math.floor(this.limit * DECREASE));
      if (this.latencyMayLowerTo(level, target)) return this.decrease(target);
      return false;
    }
    const before = this.current;
    this.limit = Math.min(this.cap, this.limit + 1 / Math.max(1, this.limit));
    return this.current !== before;
  }

  /** The latency rule may step from `level` down to `target`: not below a live floor, nor to a limit known to be slower. */
  private latencyMayLowerTo(level: number, target: number): boolean {
    const now = this.now();
    if (target >= level) return false;
    if (now < this.floor.until && target < this.floor.level) return false;
    const here = this.rates.get(level);
    const there = this.rates.get(target);
    if (here === undefined || there === undefined) return true;
    if (there >= KEEP * here) return true;
    // Measured slower: the fewer sessions cost throughput, so this level is as low as latency takes it.
    this.floor = { level, until: now + FLOOR_MS };
    return false;
  }

  /** Add a clean call to the throughput window of `level`; a window of another level, or unfilled, starts again. */
  private measure(level: number, filled: boolean, outputTokens: number): void {
    const now = this.now();
    if (!filled) {
      this.window = null;
      return;
    }
    if (!this.window || this.window.level !== level) {
      this.window = { level, startedAt: now, tokens: 0, calls: 0 };
      return; // the window's clock starts at its first call's answer
    }
    const w = this.window;
    w.tokens += Math.max(1, outputTokens);
    w.calls++;
    const spanMs = now - w.startedAt;
    if (spanMs >= WINDOW_MS && w.calls >= WINDOW_CALLS) {
      this.rates.set(level, (w.tokens * 1000) / spanMs);
      this.window = { level, startedAt: now, tokens: 0, calls: 0 };
    }
  }

  private decrease(to: number): boolean {
    const now = this.now();
    if (now - this.lastDecrease < COOLDOWN_MS) return false;
    this.lastDecrease = now;
    const before = this.current;
    this.limit = Math.max(1, Math.min(this.limit, to));
    // Latency is judged afresh at the new limit.
    this.avg = null;
    this.samples = 0;
    return this.current !== before;
  }
}
