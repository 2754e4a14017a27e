/**
 * Which run a metrics file is of: benchmark, models, a hash of the run's settings and its time span,
 * recorded under `run` in `<stem>_fleet_metrics.json` beside the run's own metrics. The results
 * consumer has the run record and fills every field; `vcfleet metrics` has only the rows and fills
 * what they tell (the models, the benchmark, the last row's time).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type { Row } from '../records/rows.ts';
import type { RunRecord } from '../stores/run-store.ts';
import type { AggregateMetrics } from './metrics.ts';

export interface RunIdentity {
  run_id: string;
  benchmark: string | null;
  policy_model: string | null;
  /** Null when no row was judged and there is no run record. */
  judge_model: string | null;
  /** SHA-256 (hex) of the run record's `settings` as canonical JSON (keys sorted); null without the record. */
  config_hash: string | null;
  /** When the run was created (the run record's `created_at`, ISO 8601); null without the record. */
  started_at: string | null;
  /** The latest row's `finished_at` (ISO 8601); null before the first row. */
  finished_at: string | null;
  /** finished_at − started_at, in seconds (3 decimals; 0 when hosts' clocks put the end first); null when either is unknown. */
  wall_s: number | null;
}

/** The metrics file: the run id and every metric at the top (as before), the identity under `run`. */
export type MetricsFile = { run_id: string } & AggregateMetrics & { run: RunIdentity };

export function metricsFile(identity: RunIdentity, metrics: AggregateMetrics): MetricsFile {
  return { run_id: identity.run_id, ...metrics, run: identity };
}

/** JSON with object keys sorted at every level, so equal settings hash equal whatever their key order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** SHA-256 (hex) of a run's settings: two runs with the same hash were produced with the same settings. */
export function configHash(settings: unknown): string {
  return createHash('sha256').update(canonicalJson(settings)).digest('hex');
}

/** The later of two ISO 8601 times (`b` when `a` is null). */
export function laterTime(a: string | null, b: string): string {
  return a === null || Date.parse(b) > Date.parse(a) ? b : a;
}

/**
 * finished − started in seconds. The start is the producer host's clock and the end a worker host's:
 * a worker whose clock runs behind can put the end before the start, and a run never takes less
 * than no time, so that is 0, not a negative wall time.
 */
function wallSeconds(started: string | null, finished: string | null): number | null {
  if (started === null || finished === null) return null;
  const ms = Date.parse(finished) - Date.parse(started);
  return Number.isFinite(ms) ? Math.max(0, Math.round(ms)) / 1000 : null;
}

/** The identity the results consumer records: all of it from the run record, the end from the rows. */
export function identityFromRecord(record: RunRecord, finishedAt: string | null): RunIdentity {
  return {
    run_id: record.run_id,
    benchmark: record.benchmark,
    policy_model: record.policy_model,
    judge_model: record.judge_model,
    config_hash: configHash(record.settings),
    started_at: record.created_at,
    finished_at: finishedAt,
    wall_s: wallSeconds(record.created_at, finishedAt),
  };
}

/**
 * The identity the rows tell (`vcfleet metrics`): models and benchmark from the rows, the end from
 * the latest row. The config hash and the start are known only to the run record: pass them from a
 * metrics file the results consumer wrote for this run (`recordedIdentity`), else they are null.
 */
export function identityFromRows(runId: string, rows: readonly Row[], recorded: RunIdentity | null = null): RunIdentity {
  const finished = rows.reduce<string | null>((latest, r) => laterTime(latest, r.finished_at), null);
  const started = recorded?.started_at ?? null;
  return {
    run_id: runId,
    benchmark: rows[0]?.benchmark ?? recorded?.benchmark ?? null,
    policy_model: rows[0]?.policy_model ?? recorded?.policy_model ?? null,
    judge_model: rows.find((r) => r.judge_model !== null)?.judge_model ?? recorded?.judge_model ?? null,
    config_hash: recorded?.config_hash ?? null,
    started_at: started,
    finished_at: finished,
    wall_s: wallSeconds(started, finished),
  };
}

const text = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const sha256 = (v: unknown): string | null => (typeof v === 'string' && /^[0-9a-f]{64}$/.test(v) ? v : null);
const time = (v: unknown): string | null => (typeof v === 'string' && Number.isFinite(Date.parse(v)) ? v : null);

/**
 * The identity recorded in an existing metrics file, when that file is of `runId` (null otherwise,
 * or when it is missing or unreadable: it is only a hint, the rows are the record).
 */
export function recordedIdentity(metricsPath: string, runId: string): (RunIdentity & { num_repeats: number | null }) | null {
  if (!existsSync(metricsPath)) return null;
  let value: { run_id?: unknown; num_repeats?: unknown; run?: Record<string, unknown> };
  try {
    value = JSON.parse(readFileSync(metricsPath, 'utf8'));
  } catch {
    return null;
  }
  const run = value?.run;
  if (value?.run_id !== runId || !run || typeof run !== 'object' || run.run_id !== runId) return null;
  const repeats = Number.isInteger(value.num_repeats) && (value.num_repeats as number) > 0 ? (value.num_repeats as number) : null;
  return {
    run_id: runId, benchmark: text(run.benchmark), policy_model: text(run.policy_model), judge_model: text(run.judge_model),
    config_hash: sha256(run.config_hash), started_at: time(run.started_at), finished_at: time(run.finished_at),
    wall_s: typeof run.wall_s === 'number' ? run.wall_s : null, num_repeats: repeats,
  };
}
