/**
 * The bound of `vcfleet serve` runs, read from Redis on scrape (never on a timer), for every run that
 * ever had a pending request under the prefix:
 * - `vcfleet_serve_pending{run_id}`: requests accepted and not finished;
 * - `vcfleet_serve_pending_image_bytes{run_id}`: the image bytes they keep in Redis;
 * - `vcfleet_serve_refused_total{run_id,reason}`: requests refused with 429 (`max_pending`, `image_budget`).
 * A scrape during a Redis outage does not hang: after `timeoutMs` it reports nothing.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Redis } from 'ioredis';
import { REFUSAL_REASONS, ServePending, type PendingCounts } from '../shared/stores/serve-pending.ts';

export interface ServeGaugeSource {
  watch(redis: Redis, prefix: string): void;
}

export function createServeGauges(registry: Registry, timeoutMs = 2000): ServeGaugeSource {
  let source: ServePending | null = null;
  // One read per scrape, shared by the three series (prom-client collects each on its own).
  let reading: Promise<Map<string, PendingCounts>> | null = null;
  const read = async (): Promise<Map<string, PendingCounts>> => {
    const out = new Map<string, PendingCounts>();
    if (!source) return out;
    const s = source;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), timeoutMs)));
    try {
      const all = await Promise.race([s.runs().then((runs) => Promise.all(runs.map(async (r) => [r, await s.counts(r)] as const))), timeout]);
      for (const [run, counts] of all ?? []) out.set(run, counts);
    } catch {
      // Redis is away: this scrape has no counts.
    } finally {
      clearTimeout(timer);
    }
    return out;
  };
  const counts = () => {
    reading ??= read().finally(() => setTimeout(() => (reading = null), 0));
    return reading;
  };
  const registers = [registry];
  new Gauge({
    name: 'vcfleet_serve_pending', help: 'vcfleet serve requests of a run accepted and not finished.', labelNames: ['run_id'], registers,
    async collect() {
      this.reset();
      for (const [run_id, c] of await counts()) this.set({ run_id }, c.pending);
    },
  });
  new Gauge({
    name: 'vcfleet_serve_pending_image_bytes', help: 'Image bytes the pending vcfleet serve requests of a run keep in Redis.', labelNames: ['run_id'], registers,
    async collect() {
      this.reset();
      for (const [run_id, c] of await counts()) this.set({ run_id }, c.image_bytes);
    },
  });
  new Counter({
    name: 'vcfleet_serve_refused_total', help: "vcfleet serve requests refused (429) for the run's bounds, by reason.", labelNames: ['run_id', 'reason'], registers,
    async collect() {
      this.reset();
      for (const [run_id, c] of await counts()) for (const reason of REFUSAL_REASONS) if (c.refused[reason]) this.inc({ run_id, reason }, c.refused[reason]);
    },
  });
  return {
    watch(redis, prefix) {
      source = new ServePending(redis, prefix);
    },
  };
}
