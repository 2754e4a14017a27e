/**
 * When to give up on a policy server that only fails. OpenCode retries 5xx, 429 and connection
 * errors forever without printing anything, so the runner asks this after every call and stops the
 * session early (an infrastructure error) instead of burning the whole task timeout.
 */
import type { GatewayStats } from '../gateway/index.ts';

export interface UpstreamFailureLimits {
  /** Give up after this many failed calls in a row (upstream errors, 5xx, 429). Default 5. */
  maxConsecutiveFailures: number;
  /** Give up when calls have failed for this long (seconds) without a success in between. Default 120. */
  maxFailingS: number;
}

export const DEFAULT_UPSTREAM_FAILURE_LIMITS: UpstreamFailureLimits = { maxConsecutiveFailures: 5, maxFailingS: 120 };

/** A reason to give up on the policy server, or null while it may still recover. */
export function upstreamGiveUpReason(stats: GatewayStats, limits: UpstreamFailureLimits, now = Date.now()): string | null {
  if (stats.consecutiveFailures === 0 || stats.failingSince === null) return null;
  const failingS = (now - stats.failingSince) / 1000;
  if (stats.consecutiveFailures >= limits.maxConsecutiveFailures || failingS >= limits.maxFailingS) {
    return `the policy server failed ${stats.consecutiveFailures} calls in a row over ${failingS.toFixed(0)} s (${describeFailures(stats)})`;
  }
  return null;
}

/** e.g. "upstream errors: connection_refused x3; HTTP 5xx/429: 2". */
export function describeFailures(stats: GatewayStats): string {
  const reasons = Object.entries(stats.upstreamErrorReasons).map(([k, n]) => `${k} x${n}`).join(', ');
  const parts: string[] = [];
  if (stats.upstreamErrors) parts.push(`unreachable: ${reasons}`);
  if (stats.retryableStatuses) parts.push(`HTTP 5xx/429 answers: ${stats.retryableStatuses}`);
  return parts.join('; ') || 'no failures';
}
