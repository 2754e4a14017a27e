/** What the fleet did the last time it reconciled a run after a lost Redis (written by the results consumer, shown by `vcfleet status`). */
import type { Redis } from 'ioredis';
import { fleetKeys } from '../redis/keys.ts';

export interface ReconcileReport {
  run_id: string;
  /** When (ISO time). */
  at: string;
  /** Why: `redis back` (the connection came back after a loss), `start`. */
  reason: string;
  /** Rows of the JSONL put back into Redis. */
  restored_rows: number;
  /** Rollouts that had neither a row nor a job, produced again. */
  reproduced: number;
  /** A serve run's accepted rollouts lost with their request's record (their clients must ask again); absent in older records. */
  lost_requests?: number;
}

export async function recordReconcile(redis: Redis, prefix: string, report: ReconcileReport): Promise<void> {
  await redis.set(fleetKeys(prefix).reconciled(report.run_id), JSON.stringify(report));
}

/** The last reconciliation of a run (null if none happened). */
export async function lastReconcile(redis: Redis, prefix: string, runId: string): Promise<ReconcileReport | null> {
  const raw = await redis.get(fleetKeys(prefix).reconciled(runId));
  if (!raw) return null;
  try {
    return JSON.parse(raw) as ReconcileReport;
  } catch {
    return null;
  }
}
