/**
 * The front door of pacing: telling back-pressure from failure, backoff, holding the agent's calls
 * while the policy server pushes back, a sandbox-worker's paces per endpoint, the bound of the time a
 * rollout's calls may be held, and the fleet's published paces for `vcfleet status`. Other folders
 * import this file only.
 */
export { backoffMs, retryAfterMs, RETRY_AFTER_CAP_MS, type BackoffOptions } from './backoff.ts';
export { askedWaitMs, isBackpressure, isQuotaGone } from './backpressure.ts';
export { sendHeld, WaitClock, type HoldEnd, type PolicyPace } from './held-calls.ts';
export { PolicyPacing } from './worker-paces.ts';
export { PolicyWaitExceeded, policyWaitError } from './policy-wait.ts';
export { paceLines, readPolicyPace, type EndpointPace } from './published-paces.ts';
