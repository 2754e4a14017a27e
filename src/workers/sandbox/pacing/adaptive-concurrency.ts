/**
 * How many sessions a sandbox-worker runs at once against its policy endpoint, adapted to what the
 * endpoint sustains: additive increase (one more session per `limit` clean calls) and
 * multiplicative decrease (by DECREASE, at most once per COOLDOWN_MS) when the endpoint pushes
 * back (429, 503 with Retry-After) or its latency per output token climbs past LATENCY_FACTOR times
 * the best seen. Bounded by 1 and the configured cap. Pure: the caller applies the limit (a lower
 * limit only stops new sessions from starting; running ones are never cut).
 */

const DECREASE = 0.75;
const COOLDOWN_MS = 5_000;
const LATENCY_FACTOR = 2.5;
/** Weight of a new latency sample in the moving average. */
const ALPHA = 0.2;
/** Latency samples before the latency signal is trusted. */
const MIN_SAMPLES = 5;

export class AdaptiveConcurrency {
  private limit: number;
  private lastDecrease = -Infinity;
  private avg: number | null = null;
  private best = Infinity;
  private samples = 0;

  constructor(private readonly cap: number, private readonly now: () => number = Date.now) {
    this.limit = cap;
  }

  /** Sessions to run at once now. */
  get current(): number {
    return Math.max(1, Math.min(this.cap, Math.floor(this.limit)));
  }

  /** The endpoint pushed back; true when the limit changed. */
  pushedBack(): boolean {
    return this.decrease();
  }

  /** A call came back clean after `latencyMs` for `outputTokens` tokens; true when the limit changed. */
  clean(latencyMs: number, outputTokens: number): boolean {
    const perToken = latencyMs / Math.max(1, outputTokens);
    this.avg = this.avg === null ? perToken : this.avg + ALPHA * (perToken - this.avg);
    this.samples++;
    // The best is forgotten slowly, so an endpoint that got slower for good is the new normal in time.
    this.best = Math.min(this.best * 1.002, this.avg);
    if (this.samples >= MIN_SAMPLES && this.avg > LATENCY_FACTOR * this.best) return this.decrease();
    const before = this.current;
    this.limit = Math.min(this.cap, this.limit + 1 / Math.max(1, this.limit));
    return this.current !== before;
  }

  private decrease(): boolean {
    const now = this.now();
    if (now - this.lastDecrease < COOLDOWN_MS) return false;
    this.lastDecrease = now;
    const before = this.current;
    this.limit = Math.max(1, this.limit * DECREASE);
    return this.current !== before;
  }
}
