/**
 * The fleet's pace against each policy endpoint, as `vcfleet status` shows it: what every live
 * sandbox-worker published of its pace (pacing/endpoint-pace.ts), summed per endpoint. Read only;
 * records past their TTL, or that do not parse, are left out.
 */
import type { Redis } from 'ioredis';
import { PACE_STATE_TTL_MS, PublishedPaceSchema } from '../shared/ports/telemetry.ts';

export interface EndpointPace {
  endpoint: string;
  model: string;
  workers: number;
  /** Sessions the workers run at once now, and their caps, summed. */
  concurrency: number;
  cap: number;
  adaptive: boolean;
  pushbacks_last_min: number;
  /** The workers' mean share of session time spent waiting on the endpoint in the last minute. */
  wait_share: number;
}


export async function readPolicyPace(redis: Redis, prefix: string, now = Date.now(), liveWorkers?: ReadonlySet<string>): Promise<EndpointPace[]> {
  const out: EndpointPace[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:policy-pace:*`, 'COUNT', 100);
    cursor = next;
    for (const key of keys) {
      // A worker that stopped (no longer in the registry) paces nothing, however fresh its last record.
      const live = Object.entries(await redis.hgetall(key))
        .filter(([worker]) => !liveWorkers || liveWorkers.has(worker))
        .map(([, raw]) => {
          try {
            return PublishedPaceSchema.safeParse(JSON.parse(raw));
          } catch {
            return null;
          }
        })
        .flatMap((p) => (p?.success && now - p.data.at < PACE_STATE_TTL_MS ? [p.data] : []));
      if (live.length === 0) continue;
      out.push({
        endpoint: live[0].endpoint, model: live[0].model, workers: live.length,
        concurrency: live.reduce((n, p) => n + p.concurrency, 0), cap: live.reduce((n, p) => n + p.cap, 0), adaptive: live.some((p) => p.adaptive),
        pushbacks_last_min: live.reduce((n, p) => n + p.pushbacksLastMin, 0), wait_share: live.reduce((n, p) => n + p.waitShare, 0) / live.length,
      });
    }
  } while (cursor !== '0');
  return out;
}

/** One line per endpoint, e.g. "policy pace: http://vllm:8000/v1 (qwen): 3/8 sessions at once (adaptive) on 2 worker(s), 5x 429 in the last minute, 20% of session time waiting". */
export function paceLines(paces: readonly EndpointPace[]): string[] {
  return paces.map((p) =>
    `policy pace: ${p.endpoint} (${p.model}): ${p.concurrency}/${p.cap} sessions at once${p.adaptive ? ' (adaptive)' : ''} on ${p.workers} worker(s), ` +
    `${p.pushbacks_last_min}x 429 in the last minute, ${(100 * p.wait_share).toFixed(0)}% of session time waiting`,
  );
}
