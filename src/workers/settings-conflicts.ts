/**
 * A worker's own configuration may set a run setting to another value than the run has (say
 * POLICY_MODEL on a sandbox host, or a judge model on a judge host). The run's value is the one
 * used; the worker says so once per run and key, naming both values and how to change the run.
 * Host settings that cannot serve the run (sandboxes that expire before the run's timeout) are
 * said the same way.
 */
import { ConfigSchema, type Config } from '../shared/config/schema.ts';
import type { Logger } from '../shared/logger.ts';
import { RUN_SETTING_KEYS, runSettingsFrom, settingDifferences, shownValue, type RunSettings } from '../shared/config/run-settings.ts';
import { runSettings, type RunRecord } from '../shared/stores/run-store.ts';
import { vcfleetCommand } from '../shared/text/advice.ts';

/** The run settings each role reads. */
const ROLE_KEYS = {
  sandbox: (key: string) => /^(task_timeout_s|policy_model_name|policy\.|agent\.|transcripts\.)/.test(key),
  judge: (key: string) => /^(visual_coding_opencode_judge_model_name|judge\.)/.test(key),
};

export class RunSettingConflicts {
  private readonly told = new Set<string>();
  /** This host's run settings (as a run would store them: an endpoint without credentials). */
  private readonly host: RunSettings;
  /** The keys of the run settings this role reads that this host's configuration sets away from the defaults. */
  private readonly mine: ReadonlySet<string>;

  /** `maxLifetimeS`: how long this host's sandboxes live at most (AgentRunner.host; null: as long as their task). */
  constructor(config: Config, private readonly role: keyof typeof ROLE_KEYS, private readonly logger: Logger, private readonly maxLifetimeS: number | null = null) {
    this.host = runSettingsFrom(config);
    const fixed = new Set(RUN_SETTING_KEYS.filter((k) => k.fixed).map((k) => k.key));
    this.mine = new Set(settingDifferences(runSettingsFrom(ConfigSchema.parse({})), this.host)
      .map((d) => d.key).filter((key) => !fixed.has(key) && ROLE_KEYS[role](key)));
  }

  /** Say what differs between this host and `run`, once per run and key. */
  check(run: RunRecord): void {
    const settings = runSettings(run);
    for (const { key, run: theirs, other: value } of settingDifferences(settings, this.host)) {
      if (!this.mine.has(key)) continue;
      this.once(`${run.run_id}\n${key}`, { run: run.run_id, key, run_value: theirs, host_value: value },
        `run ${run.run_id} has ${key}=${shownValue(theirs)} (a run setting, used); this ${this.role}-worker's configuration says ${shownValue(value)}, which applies only to runs produced with it. ` +
          `To change the run: ${vcfleetCommand(`run-set --run-id ${run.run_id} ++${key}=${shownValue(value)}`)}`);
    }
    const ttl = this.maxLifetimeS;
    if (this.role === 'sandbox' && ttl !== null && ttl < settings.task_timeout_s) {
      this.once(`${run.run_id}\nttl`, { run_id: run.run_id, task_timeout_s: settings.task_timeout_s, ttl_s: ttl },
        `run ${run.run_id} gives each rollout ${settings.task_timeout_s} s, but this worker's sandboxes expire after sandbox_config.ttl_s=${ttl} s: a long rollout would lose its sandbox. Raise sandbox_config.ttl_s on this host`);
    }
  }

  private once(id: string, fields: Record<string, unknown>, message: string): void {
    if (this.told.has(id)) return;
    this.told.add(id);
    this.logger.warn(fields, message);
  }
}
