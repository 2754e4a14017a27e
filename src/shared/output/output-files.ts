/**
 * The names of the files beside an output JSONL, spelled here only:
 *
 *   <stem>_fleet_metrics.json           the fleet's own metrics of a run (paper table, CIs, cost, identity)
 *   <stem>_aggregate_metrics.json       NeMo Gym's aggregate metrics (gym-metrics.ts), written by
 *                                       `vcfleet export --format gym` beside its rows; a run written
 *                                       before the fleet's own file was renamed held the fleet's metrics
 *                                       under this name, still read where such a run is opened
 *   <stem>_failures.jsonl               NeMo Gym's failures: the masked rows of a gym export
 *   <stem>_materialized_inputs.jsonl    NeMo Gym's inputs, one per task (`_ng_task_index`), for its reverify
 */
import { existsSync, readFileSync } from 'node:fs';

export interface OutputFiles {
  fleetMetrics: string;
  gymMetrics: string;
  failures: string;
  materializedInputs: string;
}

/** The files beside `outputJsonl` (`results/bv.jsonl` -> `results/bv_fleet_metrics.json`, ...). */
export function outputFiles(outputJsonl: string): OutputFiles {
  const stem = outputJsonl.replace(/\.jsonl$/, '');
  return {
    fleetMetrics: `${stem}_fleet_metrics.json`,
    gymMetrics: `${stem}_aggregate_metrics.json`,
    failures: `${stem}_failures.jsonl`,
    materializedInputs: `${stem}_materialized_inputs.jsonl`,
  };
}

/**
 * The fleet's metrics file of `outputJsonl` to read: `<stem>_fleet_metrics.json`, or for a run written
 * before it had that name, `<stem>_aggregate_metrics.json` when that one is the fleet's (an object, not
 * NeMo Gym's list). The new name when neither is there (where it will be written).
 */
export function fleetMetricsToRead(outputJsonl: string): string {
  const files = outputFiles(outputJsonl);
  if (existsSync(files.fleetMetrics) || !existsSync(files.gymMetrics)) return files.fleetMetrics;
  try {
    const value: unknown = JSON.parse(readFileSync(files.gymMetrics, 'utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? files.gymMetrics : files.fleetMetrics;
  } catch {
    return files.fleetMetrics;
  }
}

/** Where the fleet's metrics of a run are written (`<stem>_fleet_metrics.json`). */
export function metricsPathFor(outputJsonl: string): string {
  return outputFiles(outputJsonl).fleetMetrics;
}
