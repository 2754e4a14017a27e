/**
 * A sandbox-worker's pace against its policy endpoint, as every gateway of the worker uses it: the
 * fleet-wide limits shared through Redis (rate-limit.ts: `policy.rate_limit.*` and, with
 * `policy.adaptive_concurrency`, a rate learnt from the endpoint's 429s), the worker's own number of
 * sessions at once (adaptive-concurrency.ts), and what the user is shown of it: sessions at once,
 * push-backs in the last minute, and the share of session time spent waiting.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { errorMessage } from '../shared/errors.ts';
import { fleetKeys } from '../shared/redis/keys.ts';
import type { Logger } from '../shared/logger.ts';
import { SharedRateLimit } from './rate-limit.ts';
import { stripCredentials } from '../shared/config/run-settings.ts';
import type { PolicyPace } from './held-calls.ts';
import { AdaptiveConcurrency } from './adaptive-concurrency.ts';
import { PACE_STATE_TTL_MS, type PaceState, type PublishedPace } from '../shared/ports/telemetry.ts';

export interface FleetPaceOptions {
  redis: Redis;
  prefix: string;
  /** The endpoint (its URL; credentials are removed before it names anything) and the model. */
  endpoint: string;
  model: string;
  requestsPerMin: number | null;
  tokensPerMin: number | null;
  adaptive: boolean;
  /** Sessions at once at most (the worker's slots). */
  cap: number;
  logger: Logger;
  /** Told when the sessions at once change (the worker applies it) and every second with the state. */
  onChange?: (state: PaceState) => void;
  /** This worker's registry id: its state is published under it every few seconds, for `vcfleet status`. */
  workerName?: string;
}

/** A short id of an endpoint and model (Redis keys name it, never the URL). */
export function endpointId(url: string, model: string): string {
  return createHash('sha256').update(`${stripCredentials(url).replace(/\/+$/, '')}\n${model}`).digest('hex').slice(0, 16);
}

export class FleetPace implements PolicyPace {
  readonly id: string;
  private readonly limit: SharedRateLimit;
  private readonly aimd: AdaptiveConcurrency;
  private readonly pushbacks: number[] = [];
  private pushbacksTotal = 0;
  private holdingNow = 0;
  private sessions = 0;
  /** Per-second samples of the last minute: sessions running and calls waiting. */
  private readonly samples: Array<{ sessions: number; holding: number }> = [];
  private readonly ticker: NodeJS.Timeout;
  private warned = false;
  private ticks = 0;

  constructor(private readonly o: FleetPaceOptions) {
    this.id = endpointId(o.endpoint, o.model);
    this.limit = new SharedRateLimit(o.redis, fleetKeys(o.prefix).policyRate(this.id), { requestsPerMin: o.requestsPerMin, tokensPerMin: o.tokensPerMin, adaptive: o.adaptive });
    this.aimd = new AdaptiveConcurrency(o.cap);
    this.ticker = setInterval(() => this.tick(), 1000);
    this.ticker.unref();
  }

  async acquire(tokens: number, signal: AbortSignal): Promise<void> {
    for (let tries = 0; !signal.aborted; tries++) {
      const wait = await this.limit.tryAcquire(tokens).catch((err: unknown) => this.redisFailed(err));
      if (wait <= 0) return;
      // Jittered, so the calls that waited do not all come back at one instant.
      // An abort ends the wait early; the loop then sees the signal.
      await sleep(wait + Math.round(Math.random() * Math.min(1000, wait * 0.2 + 20 * tries)), undefined, { signal }).catch(() => {});
    }
  }

  done(call: { tokens: number; estimate: number; latencyMs: number; completionTokens: number; backpressure: boolean; retryAfterMs?: number | null }): void {
    if (call.backpressure) {
      this.pushbacksTotal++;
      this.pushbacks.push(Date.now());
      void this.limit.pushBack(call.retryAfterMs ?? 1000).catch((err: unknown) => this.redisFailed(err));
      if (this.o.adaptive && this.aimd.pushedBack()) this.changed();
      return;
    }
    void this.limit.settle(call.tokens - call.estimate, call.tokens > 0).catch((err: unknown) => this.redisFailed(err));
    if (this.o.adaptive && call.tokens > 0 && this.aimd.clean(call.latencyMs, call.completionTokens, this.sessions)) this.changed();
  }

  holding(delta: 1 | -1): void {
    this.holdingNow = Math.max(0, this.holdingNow + delta);
  }

  sessionStarted(): void {
    this.sessions++;
  }

  sessionEnded(): void {
    this.sessions = Math.max(0, this.sessions - 1);
  }

  /** Sessions to run at once now. */
  get concurrency(): number {
    return this.o.adaptive ? this.aimd.current : this.o.cap;
  }

  get state(): PaceState {
    const cutoff = Date.now() - 60_000;
    while (this.pushbacks.length > 0 && this.pushbacks[0] < cutoff) this.pushbacks.shift();
    const sessions = this.samples.reduce((n, s) => n + s.sessions, 0);
    const holding = this.samples.reduce((n, s) => n + Math.min(s.holding, s.sessions), 0);
    return {
      concurrency: this.concurrency, cap: this.o.cap, adaptive: this.o.adaptive,
      pushbacksLastMin: this.pushbacks.length, pushbacksTotal: this.pushbacksTotal, waitShare: sessions === 0 ? 0 : holding / sessions,
    };
  }

  stop(): void {
    clearInterval(this.ticker);
  }

  private tick(): void {
    this.samples.push({ sessions: this.sessions, holding: this.holdingNow });
    if (this.samples.length > 60) this.samples.shift();
    this.o.onChange?.(this.state);
    if (this.o.workerName && this.ticks++ % 5 === 0) void this.publish(this.o.workerName);
  }

  private async publish(worker: string): Promise<void> {
    const key = fleetKeys(this.o.prefix).policyPace(this.id);
    const record: PublishedPace = { ...this.state, endpoint: stripCredentials(this.o.endpoint), model: this.o.model, at: Date.now() };
    await this.o.redis.multi().hset(key, worker, JSON.stringify(record)).pexpire(key, PACE_STATE_TTL_MS * 4).exec().catch(() => undefined);
  }

  private changed(): void {
    this.o.logger.info({ concurrency: this.concurrency, cap: this.o.cap }, 'policy pace: sessions at once changed');
    this.o.onChange?.(this.state);
  }

  /** Redis failed a pace command: the call goes on unpaced (said once); the pace comes back with Redis. */
  private redisFailed(err: unknown): number {
    if (!this.warned) this.o.logger.warn({ err: errorMessage(err) }, 'policy pace: Redis did not answer; calls go out unpaced until it does');
    this.warned = true;
    return 0;
  }
}
