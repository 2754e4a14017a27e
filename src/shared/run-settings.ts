/**
 * A run's settings: the part of the configuration that belongs to the run rather than to a host,
 * frozen by `produce` into the run record (versioned) and read by every worker that serves the run.
 * What a worker sends its key to, where files go, Redis, sandboxes and concurrency are host settings:
 * each host reads them from its own configuration. No secret and no credential is ever in here.
 */
import { z } from 'zod';
import type { Config } from './config-schema.ts';
import { PoisonJobError } from './errors.ts';

export const RUN_SETTINGS_VERSION = 1;

export const RunSettingsSchema = z.object({
  settings_version: z.literal(RUN_SETTINGS_VERSION),
  benchmark: z.string(),
  num_repeats: z.number().int().positive(),
  limit: z.number().int().positive().nullable(),
  /** Wall-clock budget of one rollout, in seconds. */
  task_timeout_s: z.number().int().positive(),
  policy: z.object({
    model_name: z.string(),
    context_window: z.number().int().positive(),
    max_output_tokens: z.number().int().positive(),
    request_timeout_s: z.number().int().positive(),
    capture: z.boolean(),
    /** The endpoint the run asks for (credentials removed); null: each worker's own `policy_base_url`. */
    endpoint: z.string().nullable(),
    max_request_mib: z.number().int().positive(),
    max_concurrent_calls: z.number().int().positive(),
    max_calls_per_rollout: z.number().int().positive(),
  }),
  judge: z.object({ model_name: z.string(), temperature: z.number(), max_tokens: z.number().int().positive() }),
  agent: z.object({ max_tool_calls: z.number().int().positive() }),
  transcripts: z.object({ enabled: z.boolean(), max_image_mib: z.number().int().positive() }),
});
export type RunSettings = z.infer<typeof RunSettingsSchema>;

/** A URL without user name and password (safe to store, log and serve). */
export function stripCredentials(url: string): string {
  try {
    const u = new URL(url);
    if (!u.username && !u.password) return url;
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return url.replace(/\/\/[^/@]*@/, '//');
  }
}

export function runSettingsFrom(config: Config): RunSettings {
  const p = config.policy;
  return {
    settings_version: RUN_SETTINGS_VERSION,
    benchmark: config.benchmark,
    num_repeats: config.num_repeats,
    limit: config.limit,
    task_timeout_s: config.task_timeout_s,
    policy: {
      model_name: config.policy_model_name,
      context_window: p.context_window,
      max_output_tokens: p.max_output_tokens,
      request_timeout_s: p.request_timeout_s,
      capture: p.capture,
      endpoint: p.endpoint === null ? null : stripCredentials(p.endpoint),
      max_request_mib: p.max_request_mib,
      max_concurrent_calls: p.max_concurrent_calls,
      max_calls_per_rollout: p.max_calls_per_rollout,
    },
    judge: { model_name: config.visual_coding_opencode_judge_model_name, temperature: config.judge.temperature, max_tokens: config.judge.max_tokens },
    agent: { max_tool_calls: config.agent.max_tool_calls },
    transcripts: { enabled: config.transcripts.enabled, max_image_mib: config.transcripts.max_image_mib },
  };
}

/** The settings of a run record; a record of another version stops the job with a message that says so. */
export function parseRunSettings(runId: string, raw: unknown): RunSettings {
  const version = (raw as { settings_version?: unknown } | null | undefined)?.settings_version;
  if (version !== RUN_SETTINGS_VERSION) {
    const what = version === undefined ? 'an older vcfleet (its run record has no settings version)' : `a vcfleet whose run settings are version ${String(version)}`;
    throw new PoisonJobError(`run ${runId} was produced by ${what}; this worker reads version ${RUN_SETTINGS_VERSION}: serve it with the vcfleet that produced it, or produce the run again`);
  }
  const parsed = RunSettingsSchema.safeParse(raw);
  if (!parsed.success) {
    throw new PoisonJobError(`run ${runId} has malformed settings: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return parsed.data;
}
