/**
 * The contracts of what the fleet's processes report about themselves: the metrics hooks a process
 * wires into its stages (`FleetMetrics`, implemented by ops/prom-metrics.ts), a
 * sandbox-worker's admission and pace states, and the pace record a worker publishes in Redis for
 * `vcfleet status` (written by pacing/endpoint-pace.ts, read by pacing/published-paces.ts). Defined here
 * once, so that the roles, pacing and ops meet through them and never import each other.
 */
import type { Redis } from 'ioredis';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import type { AgentRunner } from './agent.ts';
import type { Judge } from './judge.ts';
import type { QueueName } from '../queue/registry.ts';
import type { JobEndHook } from '../queue/stage-worker.ts';
import type { Row } from '../records/rows.ts';


/** A sandbox-worker's admission by memory. */
export interface AdmissionState {
  /** Rollouts this worker runs at once (its BullMQ concurrency). */
  slots: number;
  /** Why the worker takes no rollouts now; null while it takes them. */
  held: string | null;
  /** Times the worker held off since it started. */
  holds: number;
}

/** What the progress line, `vcfleet status` and Prometheus show of a sandbox-worker's pace against its policy endpoint. */
export interface PaceState {
  /** Sessions this worker runs at once now (its cap when adaptation is off). */
  concurrency: number;
  cap: number;
  adaptive: boolean;
  /** Push-backs (429, 503 with Retry-After) the endpoint answered in the last minute. */
  pushbacksLastMin: number;
  pushbacksTotal: number;
  /** Share of the session time of the last minute spent waiting on the endpoint (0..1). */
  waitShare: number;
}

/** How long a published pace counts as current, in ms. */
export const PACE_STATE_TTL_MS = 30_000;

/** A worker's pace as it publishes it in Redis (one hash per endpoint, a field per worker), bounded when read back. */
export const PublishedPaceSchema = z.object({
  endpoint: z.string().max(2000), model: z.string().max(500), concurrency: z.number(), cap: z.number(), adaptive: z.boolean(),
  pushbacksLastMin: z.number(), pushbacksTotal: z.number().default(0), waitShare: z.number(), at: z.number(),
});
export type PublishedPace = z.infer<typeof PublishedPaceSchema>;

/** The hooks a process wires into its stages; every method is cheap and never throws. */
export interface FleetMetrics {
  readonly registry: Registry;
  /** The `onJobEnd` hook for the stage worker of `queue`. */
  jobEnd(queue: QueueName): JobEndHook;
  /** The `onCommit` hook of the results consumer (`result`: new | replaced | duplicate). */
  rowCommitted(row: Row, result: string): void;
  /** The agent runner, counting running rollouts and their stop reasons. */
  wrapAgent(agent: AgentRunner): AgentRunner;
  /** The judge, counting gradings by outcome and verdict. */
  wrapJudge(judge: Judge): Judge;
  /** A worker of `queue` sat idle with jobs waiting and its queue watchdog renewed it. */
  stallRecovered(queue: QueueName): void;
  /** The sandbox-worker's admission state (its slots, and whether it holds off for lack of memory). */
  admission(state: AdmissionState): void;
  /** The sandbox-worker's pace against its policy endpoint (sessions at once, push-backs, wait share). */
  pace(state: PaceState): void;
  /** Report the depth of every queue under `prefix` on scrape, read through `redis`. */
  watchQueues(redis: Redis, prefix: string): void;
  /** Release what `watchQueues` opened (the connection stays with its owner). Safe to call twice. */
  close(): Promise<void>;
}
