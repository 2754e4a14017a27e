/**
 * A sandbox-worker's paces, one per policy endpoint (and model) its rollouts call (endpoint-pace.ts),
 * and the number of sessions the worker runs at once that follows from them: the least any endpoint
 * called in the last minute allows, within the worker's slots.
 */
import type { Redis } from 'ioredis';
import type { Config } from '../shared/config/load.ts';
import type { Logger } from '../shared/logger.ts';
import { endpointId, FleetPace } from './endpoint-pace.ts';
import type { PaceState } from '../shared/ports/telemetry.ts';

/** An endpoint not called for this long no longer limits the worker's sessions, in ms. */
const IDLE_MS = 60_000;

export interface PolicyPacingOptions {
  config: Pick<Config, 'policy' | 'queues'>;
  redis: Redis;
  logger: Logger;
  /** The worker's slots: sessions at once at most. */
  cap: number;
  workerName?: string;
  /** Told every second, and whenever the sessions at once change, with the worker's pace. */
  onChange?: (state: PaceState) => void;
}

export class PolicyPacing {
  private readonly paces = new Map<string, { pace: FleetPace; usedAt: number }>();
  private last: PaceState;

  constructor(private readonly o: PolicyPacingOptions) {
    this.last = { concurrency: o.cap, cap: o.cap, adaptive: o.config.policy.adaptive_concurrency, pushbacksLastMin: 0, pushbacksTotal: 0, waitShare: 0 };
  }

  /** The pace of calls to `url` for `model`, and the bound of a rollout's held time. */
  paceFor(url: string, model: string): { pace: FleetPace; maxWaitS: number } {
    const id = endpointId(url, model);
    let entry = this.paces.get(id);
    if (!entry) {
      const p = this.o.config.policy;
      const pace = new FleetPace({
        redis: this.o.redis, prefix: this.o.config.queues.prefix, endpoint: url, model,
        requestsPerMin: p.rate_limit.requests_per_min, tokensPerMin: p.rate_limit.tokens_per_min, adaptive: p.adaptive_concurrency,
        cap: this.o.cap, logger: this.o.logger, workerName: this.o.workerName, onChange: () => this.changed(),
      });
      entry = { pace, usedAt: Date.now() };
      this.paces.set(id, entry);
    }
    entry.usedAt = Date.now();
    return { pace: entry.pace, maxWaitS: this.o.config.policy.max_wait_s };
  }

  /** Sessions to run at once now. */
  get concurrency(): number {
    return this.state.concurrency;
  }

  /** The worker's pace: the tightest endpoint's sessions at once, push-backs summed, the largest wait share. */
  get state(): PaceState {
    const now = Date.now();
    const live = [...this.paces.values()].filter((e) => now - e.usedAt < IDLE_MS).map((e) => e.pace.state);
    if (live.length === 0) return { ...this.last, concurrency: this.o.cap, pushbacksLastMin: 0, waitShare: 0 };
    return {
      concurrency: Math.min(...live.map((s) => s.concurrency)), cap: this.o.cap, adaptive: this.o.config.policy.adaptive_concurrency,
      pushbacksLastMin: live.reduce((n, s) => n + s.pushbacksLastMin, 0),
      pushbacksTotal: [...this.paces.values()].reduce((n, e) => n + e.pace.state.pushbacksTotal, 0),
      waitShare: Math.max(...live.map((s) => s.waitShare)),
    };
  }

  stop(): void {
    for (const e of this.paces.values()) e.pace.stop();
  }

  private changed(): void {
    this.last = this.state;
    this.o.onChange?.(this.last);
  }
}
