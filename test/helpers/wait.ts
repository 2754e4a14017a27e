/** Waiting in tests: for a condition, polled, never for a fixed time. */
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Poll `probe` every `everyMs` until it returns something other than undefined or false, and return
 * that; fail naming `what` after `timeoutMs`.
 */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 60_000, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value as T;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}
