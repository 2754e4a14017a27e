/** Turning `judge.rate_limit_per_s` into a BullMQ limiter (`max` jobs per `duration` ms, integer max >= 1). */
import type { Config } from '../../shared/config/load.ts';

/** Longest window tried when looking for an exact integer `max`, in seconds. */
const MAX_WINDOW_S = 10;

/**
 * The BullMQ limiter for a rate in requests per second. An exact window of 1..10 s is used when
 * one gives an integer `max` (2.5/s -> 5 per 2000 ms, 0.3/s -> 3 per 10000 ms); otherwise `max` is the
 * rounded rate (at least 1) and the window is stretched to match (0.123/s -> 1 per 8130 ms).
 */
export function limiterForRate(ratePerS: number): { max: number; duration: number } {
  if (!(ratePerS > 0) || !Number.isFinite(ratePerS)) throw new RangeError(`rate must be a positive number, got ${ratePerS}`);
  for (let windowS = 1; windowS <= MAX_WINDOW_S; windowS++) {
    const max = ratePerS * windowS;
    if (max >= 1 && Math.abs(max - Math.round(max)) < 1e-9) return { max: Math.round(max), duration: windowS * 1000 };
  }
  const max = Math.max(1, Math.round(ratePerS));
  return { max, duration: Math.round((1000 * max) / ratePerS) };
}

/** The fleet-wide judge limiter from the resolved config (`judge.rate_limit_per_s`). */
export function judgeLimiter(config: Pick<Config, 'judge'>): { max: number; duration: number } {
  return limiterForRate(config.judge.rate_limit_per_s);
}
