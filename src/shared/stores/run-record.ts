/**
 * The run record: what `produce` freezes of a run in Redis (its size, models, versioned settings, no
 * secret), where its jobs are queued, what made it, every later change of its settings, and where
 * the results consumer writes its output.
 */
import { z } from 'zod';
import { parseRunSettings, type RunSettings } from '../config/run-settings.ts';

export const RUN_ORIGINS = ['produce', 'run', 'demo', 'serve'] as const;
export type RunOrigin = (typeof RUN_ORIGINS)[number];

export const SettingsChangeSchema = z.object({
  at: z.string(),
  /** Each changed run setting by its config key, with the values before and after. */
  changes: z.array(z.object({ key: z.string(), from: z.unknown(), to: z.unknown() })),
  /** Rollouts of the run that had finished (rows) when it changed: more than 0 only with --force. */
  finished_rollouts: z.number().int().min(0),
  forced: z.boolean(),
  /** Where it was changed from (host name). */
  host: z.string(),
});
export type SettingsChange = z.infer<typeof SettingsChangeSchema>;

/** Where a run's output is written: the results consumer's host and the path there (recorded by it). */
export const OutputLocationSchema = z.object({
  host: z.string(),
  /** The JSONL's absolute path on that host. */
  path: z.string(),
  /** The results consumer's worker id. */
  worker: z.string().nullable(),
  /** When the consumer opened the output. */
  at: z.string(),
});
export type OutputLocation = z.infer<typeof OutputLocationSchema>;

export const RunRecordSchema = z.object({
  run_id: z.string(),
  benchmark: z.string(),
  created_at: z.string(),
  num_tasks: z.number().int(),
  num_repeats: z.number().int(),
  /** Rollouts in the run: tasks x repeats. */
  total: z.number().int(),
  output_jsonl_fpath: z.string(),
  policy_model: z.string(),
  judge_model: z.string(),
  /** The run's settings (config/run-settings.ts), versioned; read them with `runSettings(record)`. */
  settings: z.unknown(),
  /** Whose queues hold the run's jobs: the fleet's (null) or its own (its run id; `vcfleet run`, `demo`). */
  queue_scope: z.string().nullable().default(null),
  /** What made the run: `produce`, `run`, `demo` (a demo is resumed as a demo) or `serve` (its tasks come by request). */
  origin: z.enum(RUN_ORIGINS).default('produce'),
  /** Every change of the run's settings after it was produced (`vcfleet run-set`), oldest first. */
  settings_changes: z.array(SettingsChangeSchema).default([]),
});
export type RunRecord = z.infer<typeof RunRecordSchema>;

/** The settings of a run; a record of another version throws a PoisonJobError that says so. */
export function runSettings(run: RunRecord): RunSettings {
  return parseRunSettings(run.run_id, run.settings);
}
