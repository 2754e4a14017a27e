/**
 * `vcfleet run-set`: change the settings of a run after it was produced. Only run settings can
 * change (host settings are each host's own; `benchmark`, `limit` and `num_repeats` make the run's
 * rollouts), and only before any of its rollouts finished unless forced: a run graded under two
 * settings would not say which row had which. Every change is kept in the run record.
 */
import os from 'node:os';
import type { Config } from '../shared/config/schema.ts';
import { configKeyPaths } from '../shared/config/key-paths.ts';
import { ConfigError } from '../shared/errors.ts';
import { RUN_SETTING_KEYS, settingDifferences, shownValue, withSetting } from '../shared/config/run-settings.ts';
import { RunStore, runSettings, type RunRecord, type SettingsChange } from '../shared/stores/run-store.ts';
import { vcfleetCommand } from '../shared/text/advice.ts';

export interface RunSetResult {
  record: RunRecord;
  /** The change made, or null when the run already had these values. */
  change: SettingsChange | null;
}

const CHANGEABLE = RUN_SETTING_KEYS.filter((k) => !k.fixed).map((k) => k.key);

/** Why `key` cannot be set on a run, or null when it can. */
export function notARunSetting(key: string): string | null {
  const entry = RUN_SETTING_KEYS.find((k) => k.key === key);
  if (entry?.fixed) return `${key} makes the run's rollouts and cannot change: produce a new run with it (${vcfleetCommand(`produce --run-id NEW ++${key}=...`)})`;
  if (entry) return null;
  const known = configKeyPaths().includes(key);
  return known
    ? `${key} is a host setting: every host reads it from its own configuration, never from the run; set it where the workers run. Run settings: ${CHANGEABLE.join(', ')}`
    : `${key} is not a setting; run settings: ${CHANGEABLE.join(', ')}`;
}

/**
 * Set the run settings named by `keys` to their values in `config` (the command's configuration,
 * where `++key=value` put them). Refused when a rollout of the run has finished, unless `force`.
 */
export async function setRunSettings(store: RunStore, runId: string, keys: readonly string[], config: Config, force: boolean): Promise<RunSetResult> {
  if (keys.length === 0) throw new ConfigError(`name the settings to change as ++key=value; run settings: ${CHANGEABLE.join(', ')}`);
  const refused = keys.map(notARunSetting).filter((why): why is string => why !== null);
  if (refused.length) throw new ConfigError(refused.join('\n'));
  const run = await store.getRun(runId);
  if (!run) throw new ConfigError(`run ${runId} does not exist under the prefix ${store.prefix}; check --run-id, REDIS_URL and VCFLEET_PREFIX`);
  const before = runSettings(run);
  const after = keys.reduce((settings, key) => withSetting(settings, key, config), before);
  const changes = settingDifferences(before, after).map((d) => ({ key: d.key, from: d.run, to: d.other }));
  if (changes.length === 0) return { record: run, change: null };
  const finished = await store.countRows(runId);
  if (finished > 0 && !force) {
    const what = changes.map((c) => `${c.key} ${shownValue(c.from)} -> ${shownValue(c.to)}`).join(', ');
    throw new ConfigError(
      `run ${runId} has ${finished} finished rollouts made with its current settings; changing ${what} now would mix two settings in one run. ` +
        'Produce a new run for the new settings, or pass --force to change this one anyway (the change is recorded in the run record)',
    );
  }
  const change: SettingsChange = { at: new Date().toISOString(), changes, finished_rollouts: finished, forced: finished > 0, host: os.hostname() };
  const record = await store.updateRun(runId, (current) => {
    const settings = keys.reduce((s, key) => withSetting(s, key, config), runSettings(current));
    return {
      ...current, settings, policy_model: settings.policy_model_name, judge_model: settings.visual_coding_opencode_judge_model_name,
      settings_changes: [...current.settings_changes, change],
    };
  });
  return { record, change };
}
