/**
 * A rollout whose calls were held past `policy.max_wait_s`: the policy server is busy, not failing,
 * and the model is not to blame. The rollout goes back to the queue without spending an attempt,
 * once; if it waits that long again, the hand-back spends one (so a server that never frees up
 * still ends in a row, after the job's attempts). Which time it is, is kept in Redis, so a rollout
 * handed back to another worker counts the same.
 */
import type { Redis } from 'ioredis';
import { HandBackError, InfraError } from '../shared/errors.ts';
import { fleetKeys } from '../shared/redis/keys.ts';

/** How long the "handed back once" mark is kept, in seconds (longer than any rollout's retries). */
const MARK_TTL_S = 7 * 24 * 3600;
/** Delay before a handed-back rollout may start again, in ms (the server asked the fleet to wait). */
const HAND_BACK_DELAY_MS = 10_000;

/** Thrown by a session whose held calls waited past `policy.max_wait_s` (before its outcome was decided). */
export class PolicyWaitExceeded extends InfraError {
  override name = 'PolicyWaitExceeded';
  constructor(message: string) {
    super(message, { code: 'policy_server' });
  }
}

/** The error the stage throws for it: a hand-back (first time), else the InfraError itself (spends an attempt). */
export async function policyWaitError(redis: Redis, prefix: string, runId: string, rolloutId: string, err: PolicyWaitExceeded): Promise<Error> {
  const first = await redis.set(fleetKeys(prefix).policyWaitHandBack(runId, rolloutId), '1', 'EX', MARK_TTL_S, 'NX');
  if (first === 'OK') return new HandBackError(`${err.message}; handed back to the queue (its attempt not spent)`, HAND_BACK_DELAY_MS);
  return new InfraError(`${err.message}, a second time: this attempt is spent`, { code: 'policy_server', cause: err });
}
