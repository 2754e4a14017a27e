/**
 * A worker's own configuration may set a run setting to another value than the run has (say
 * POLICY_MODEL on a sandbox host, or a judge model on a judge host). The run's value is the one
 * used; the worker says so once per run and key, naming both values and how to change the run.
 * Host settings that cannot serve the run (sandboxes that expire before the run's timeout) are
 * said the same way.
 */
import { ConfigSchema, type Config } from '../shared/config-schema.ts';
import type { Logger } from '../shared/logger.ts';
import { RUN_SETTING_KEYS, shownValue, valueAt } from '../shared/run-settings.ts';
import { runSettings, type RunRecord } from '../shared/run-store.ts';

/** The run settings each role reads. */
const ROLE_KEYS = {
  sandbox: (key: string) => /^(task_timeout_s|policy_model_name|policy\.|agent\.|transcripts\.)/.test(key),
  judge: (key: string) => /^(visual_coding_opencode_judge_model_name|judge\.)/.test(key),
};

export class RunSettingConflicts {
  private readonly told = new Set<string>();
  /** The run settings this host's configuration sets away from the defaults. */
  private readonly mine: Array<{ key: string; path: readonly string[]; value: unknown }>;

  constructor(private readonly config: Config, private readonly role: keyof typeof ROLE_KEYS, private readonly logger: Logger) {
    const defaults = ConfigSchema.parse({});
    this.mine = RUN_SETTING_KEYS.filter(({ key, fixed }) => !fixed && ROLE_KEYS[role](key)).flatMap(({ key, path }) => {
      const value = valueAt(config, key.split('.'));
      return JSON.stringify(value) === JSON.stringify(valueAt(defaults, key.split('.'))) ? [] : [{ key, path, value }];
    });
  }

  /** Say what differs between this host and `run`, once per run and key. */
  check(run: RunRecord): void {
    const settings = runSettings(run);
    for (const { key, path, value } of this.mine) {
      const theirs = valueAt(settings, path);
      if (JSON.stringify(theirs) === JSON.stringify(value)) continue;
      this.once(`${run.run_id}\n${key}`, { run: run.run_id, key, run_value: theirs, host_value: value },
        `run ${run.run_id} has ${key}=${shownValue(theirs)} (a run setting, used); this ${this.role}-worker's configuration says ${shownValue(value)}, which applies only to runs produced with it. ` +
          `To change the run: vcfleet run-set --run-id ${run.run_id} ++${key}=${shownValue(value)}`);
    }
    const ttl = this.config.sandbox_config.ttl_s;
    if (this.role === 'sandbox' && this.config.sandbox_provider === 'opensandbox' && ttl < settings.task_timeout_s) {
      this.once(`${run.run_id}\nttl`, { run: run.run_id, task_timeout_s: settings.task_timeout_s, ttl_s: ttl },
        `run ${run.run_id} gives each rollout ${settings.task_timeout_s} s, but this worker's sandboxes expire after sandbox_config.ttl_s=${ttl} s: a long rollout would lose its sandbox. Raise sandbox_config.ttl_s on this host`);
    }
  }

  private once(id: string, fields: Record<string, unknown>, message: string): void {
    if (this.told.has(id)) return;
    this.told.add(id);
    this.logger.warn(fields, message);
  }
}
