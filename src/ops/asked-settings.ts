/**
 * A run keeps the settings it was made with. A command that serves or runs an existing run and
 * names a run setting on its command line (`++policy.token_capture=false`, `--benchmark`) with
 * another value than the run's is refused, naming the setting, both values and how to start a new
 * run; or, with `--update-settings`, the run is changed as `vcfleet run-set` changes it (refused once
 * rollouts of it finished). Settings not named on the command line are the run's, as always.
 */
import type { Config } from '../shared/config/schema.ts';
import { ConfigError } from '../shared/errors.ts';
import { RUN_SETTING_KEYS, runSettingsFrom, settingDifferences, shownValue } from '../shared/config/run-settings.ts';
import { runSettings, type RunRecord, type RunStore } from '../shared/stores/run-store.ts';
import { setRunSettings } from './run-set.ts';

/** The run settings this command names: `++key=value` overrides and flags (by config key), parents included (`++policy=…`). */
export function askedRunSettings(overrides: readonly string[], flagKeys: readonly string[] = []): string[] {
  const named = [...overrides.map((o) => o.replace(/^\+\+/, '').split('=')[0]), ...flagKeys];
  return RUN_SETTING_KEYS.map((s) => s.key).filter((key) => named.some((n) => key === n || key.startsWith(`${n}.`)));
}

export interface HoldOptions {
  /** The run settings named on the command line (askedRunSettings). */
  asked: readonly string[];
  /** `--update-settings`: change the run instead of refusing. */
  update: boolean;
  /** How to start a new run with these settings, e.g. `./vcfleet serve --run-id NEW ++policy.token_capture=false`. */
  newRun: string;
  /** The flag that changes the run instead (`--update-settings`), or null where the command has none. */
  updateFlag: string | null;
}

/** The run, checked (or changed, with `update`) against the settings this command names; throws a ConfigError naming each difference. */
export async function holdRunSettings(store: RunStore, run: RunRecord, config: Config, options: HoldOptions): Promise<RunRecord> {
  if (options.asked.length === 0) return run;
  const differences = settingDifferences(runSettings(run), runSettingsFrom(config)).filter((d) => options.asked.includes(d.key));
  if (differences.length === 0) return run;
  if (options.update) return (await setRunSettings(store, run.run_id, differences.map((d) => d.key), config, false)).record;
  const what = differences.map((d) => `${d.key}=${shownValue(d.run)} (this command asks for ${shownValue(d.other)})`).join(', ');
  const change = options.updateFlag ? `, or pass ${options.updateFlag} to change run ${run.run_id} (refused once rollouts of it finished)` : '';
  throw new ConfigError(
    `run ${run.run_id} was made with ${what}; a run keeps its settings. Start a new run with another id (\`${options.newRun}\`)${change}`,
  );
}
