/**
 * Holding the agent's calls while the policy server pushes back. A call of OpenCode's own
 * conversation answered 429 (or 503 with Retry-After) is not passed on: the gateway waits what the
 * server asked for (jittered, bounded) and sends it again, so OpenCode never sees it and the call
 * never counts toward giving up on the server. The time held (and the time a call waited for the
 * fleet's pace) is the rollout's `policy_wait_s`: the task timeout does not count it, and it has
 * its own bound (`policy.max_wait_s`). Only the agent's calls are held (conversation.ts decides,
 * from facts the model cannot forge); the model's own calls get their 429 like any answer.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type http from 'node:http';
import { holdDelayMs } from './backpressure.ts';
import type { PolicyPace } from '../shared/ports/agent.ts';

export type { PolicyPace } from '../shared/ports/agent.ts';

/** The union of the intervals in which some call of one rollout waited: its `policy_wait_s`. */
export class WaitClock {
  private open = 0;
  private since = 0;
  private doneMs = 0;

  constructor(private readonly now: () => number = Date.now) {}

  start(): void {
    if (this.open++ === 0) this.since = this.now();
  }

  stop(): void {
    if (this.open === 0) return;
    if (--this.open === 0) this.doneMs += this.now() - this.since;
  }

  /** Time waited so far, the wait going on now included, in ms. */
  totalMs(): number {
    return this.doneMs + (this.open > 0 ? this.now() - this.since : 0);
  }
}

export interface HoldOptions {
  clock: WaitClock;
  pace?: PolicyPace;
  /** Bound of the rollout's whole wait, in ms (`policy.max_wait_s`). */
  maxWaitMs: number;
  /** Tokens the call is expected to cost (for the shared tokens-per-minute limit). */
  estimate: number;
  /** The sandbox side of the call: a hang-up ends the hold. */
  res: http.ServerResponse;
  /** Aborts when the gateway closes. */
  signal: AbortSignal;
  /** One held answer (429/503) was seen. */
  onHeld(status: number): void;
}

/** Why a held call ended without an answer for the sandbox: the wait bound, or the sandbox or gateway went away. */
export type HoldEnd = 'max_wait' | 'gone';

/** Waits `ms`: true, or false as soon as `signal` aborts or the sandbox's connection `res` closes. */
async function waitHeld(ms: number, res: http.ServerResponse, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted || res.destroyed) return false;
  const closed = new AbortController();
  const onClose = () => closed.abort();
  res.once('close', onClose);
  try {
    return await sleep(ms, true, { signal: AbortSignal.any([signal, closed.signal]) }).catch(() => false);
  } finally {
    res.off('close', onClose);
  }
}

/** Wait for the pace, counted as the rollout's wait. */
async function paced(o: HoldOptions, waits: boolean): Promise<void> {
  if (!o.pace) return;
  if (waits) {
    o.clock.start();
    o.pace.holding(1);
  }
  try {
    await o.pace.acquire(o.estimate, o.signal);
  } finally {
    if (waits) {
      o.pace.holding(-1);
      o.clock.stop();
    }
  }
}

/** What a held call needs to know of one answer (the gateway's forwarded call): its usage, and whether it was back-pressure. */
export interface HeldAnswer {
  response: { promptTokens: number | null; completionTokens: number | null };
  /** The policy server pushed back (429, 503 with Retry-After): the call is held and sent again. */
  backpressure?: { status: number; retryAfterMs: number | null };
}

/**
 * Send (`send(hold)`) until the policy server answers something other than back-pressure; with
 * `held` false (not the agent's call) once, the answer passed on whatever it is.
 */
export async function sendHeld<R extends HeldAnswer>(send: (hold: boolean) => Promise<R>, held: boolean, o: HoldOptions): Promise<R | HoldEnd> {
  for (let tries = 1; ; tries++) {
    await paced(o, held);
    if (o.signal.aborted || o.res.destroyed) return 'gone';
    const started = Date.now();
    const result = await send(held);
    const tokens = (result.response.promptTokens ?? 0) + (result.response.completionTokens ?? 0);
    o.pace?.done({
      tokens: result.backpressure ? 0 : tokens, estimate: o.estimate, latencyMs: Date.now() - started, completionTokens: result.response.completionTokens ?? 0,
      // Only what the endpoint answered the agent's held calls moves the fleet's pace: the model's own calls cannot.
      backpressure: result.backpressure !== undefined, retryAfterMs: result.backpressure?.retryAfterMs ?? null,
    });
    if (!result.backpressure) return result;
    o.onHeld(result.backpressure.status);
    const delay = holdDelayMs(tries, result.backpressure.retryAfterMs);
    if (o.clock.totalMs() + delay > o.maxWaitMs) return 'max_wait';
    o.clock.start();
    o.pace?.holding(1);
    const waited = await waitHeld(delay, o.res, o.signal);
    o.pace?.holding(-1);
    o.clock.stop();
    if (!waited) return 'gone';
  }
}
