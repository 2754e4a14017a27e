/** How `produce` and `run-set` show a run's settings: by the config key a user types after `++`. */
import path from 'node:path';
import { RUN_SETTING_KEYS, shownValue, valueAt, type RunSettings, type SettingDifference } from '../shared/config/run-settings.ts';
import { table } from './runtime.ts';
import { vcfleetCommand } from '../shared/text/advice.ts';

/** The run settings frozen in a run record, one per line, and how to change them. */
export function runSettingsText(runId: string, settings: RunSettings, output: string): string {
  const rows = RUN_SETTING_KEYS.map(({ key, path }) => [`  ${key}`, shownValue(valueAt(settings, path))]);
  rows.push(['  output_jsonl_fpath', `${output}${path.isAbsolute(output) ? '' : " (under the results host's output_root)"}`]);
  return [
    `run settings of ${runId} (frozen in the run record; every worker uses these; change with \`${vcfleetCommand(`run-set --run-id ${runId} ++key=value`)}\`):`,
    table(rows),
    'host settings (policy endpoint and key, judge endpoint and key, sandboxes, output root, concurrency) are read on each host',
  ].join('\n');
}

/** Where this command's settings differ from the existing run's, and how to change the run. */
export function differencesText(runId: string, differences: readonly SettingDifference[]): string {
  const rows = differences.map((d) => [`  ${d.key}`, `run: ${shownValue(d.run)}`, `yours: ${shownValue(d.other)}`]);
  const fix = differences.map((d) => `++${d.key}=${shownValue(d.other)}`).join(' ');
  return [
    `run ${runId} existed with other settings; it keeps its own:`,
    table(rows),
    `to change the run: ${vcfleetCommand(`run-set --run-id ${runId} ${fix}`)}   (or produce a new run with another --run-id)`,
  ].join('\n');
}
