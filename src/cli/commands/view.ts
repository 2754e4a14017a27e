/** `vcfleet view [FILE.jsonl...]`: the rollout viewer over output files (two: their runs' compare page), until stopped. */
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { ConfigError, DataError } from '../../shared/errors.ts';
import { createFilesSource } from '../../viewer/files-source.ts';
import { newestJsonl } from '../../viewer/newest-output.ts';
import { startViewerServer } from '../../viewer/server.ts';
import { readPublishedResults } from '../../shared/output/published-results.ts';
import type { Cli } from '../context.ts';
import { onShutdownSignals } from '../runtime.ts';
import { vcfleetCommand } from '../../shared/text/advice.ts';

/** Where `vcfleet view` looks for output files when none is named (relative to the working folder). */
export const RESULTS_DIR = 'results';
export const DEFAULT_VIEW_PORT = 7575;

interface ViewFlags {
  config?: string;
  host: string;
  port: string;
}

function parsePort(text: string): number {
  const port = Number(text);
  if (!(text.trim() !== '' && Number.isInteger(port) && port >= 0 && port <= 65535)) {
    throw new ConfigError(`--port must be a port number (0-65535; 0 = any free port), not "${text}"`);
  }
  return port;
}

/** The file to view: the one named, or the newest `*.jsonl` under results/ (said through `note`, stderr by default). */
export function pickFile(file: string | undefined, resultsDir = RESULTS_DIR, note: (line: string) => void = (line) => process.stderr.write(line)): string {
  if (file !== undefined) {
    if (!existsSync(file)) throw new DataError(`no file ${path.resolve(file)}: pass the output JSONL of a run (its output_jsonl_fpath)`);
    return file;
  }
  const found = newestJsonl(resultsDir);
  if (!found) {
    throw new DataError(
      `no *.jsonl under ${path.resolve(resultsDir)}: pass the output file of a run, e.g. ${vcfleetCommand('view results/babyvision_opencode.jsonl')}`,
    );
  }
  note(`viewing ${found} (the newest *.jsonl under ${resultsDir}/; pass a file to choose another)\n`);
  return found;
}

export function registerView(program: Command, cli: Cli): void {
  program
    .command('view')
    .description('browse the rollouts of an output JSONL: metrics, charts, every turn, tool call and image')
    .argument('[files...]', `output JSONL of a run (default: the newest *.jsonl under ${RESULTS_DIR}/ of output_root, the working folder by default); two files: their runs side by side on the compare page`)
    .option('--host <address>', 'address to bind; any other than 127.0.0.1, ::1, localhost needs the dashboard credentials', '127.0.0.1')
    .option('--port <n>', 'port (0 = any free port)', String(DEFAULT_VIEW_PORT))
    .option('--config <path>', 'config YAML (for the dashboard credentials)')
    .addHelpText('after', '\nCredentials (required beyond loopback): VCFLEET_DASHBOARD_USER + VCFLEET_DASHBOARD_PASSWORD, or VCFLEET_DASHBOARD_TOKEN.')
    .action(async (fileArgs: string[], opts: ViewFlags) => {
      const port = parsePort(opts.port);
      const { config, logger } = cli.context(opts);
      // Where runs write their rows by default: results/ under this host's output root (the working folder unless output_root says).
      const resultsDir = path.join(config.output_root ?? '.', RESULTS_DIR);
      const files = fileArgs.length ? fileArgs.map((f) => pickFile(f, resultsDir)) : [pickFile(undefined, resultsDir)];
      const file = files.join(' ');
      const source = createFilesSource(files);
      const d = config.dashboard;
      const viewer = await startViewerServer(source, {
        host: opts.host, port, credentials: { user: d.user, password: d.password, token: d.token },
        published: readPublishedResults(config.report.published_results),
        onError: (err, at) => logger.error({ path: at, err: (err as Error).message }, 'viewer request failed'),
      });
      const runs = await source.runs();
      // One run: its page; one run in each of two files: the compare page of the first against the second.
      const firstOf = async (f: string) => (await createFilesSource([f]).runs())[0]?.run_id;
      const pair = files.length === 2 && runs.length === 2 ? [await firstOf(files[0]), await firstOf(files[1])] : [];
      const only = runs.length === 1
        ? `runs/${encodeURIComponent(runs[0].run_id)}`
        : pair[0] && pair[1] ? `compare?a=${encodeURIComponent(pair[0])}&b=${encodeURIComponent(pair[1])}` : '';
      process.stdout.write(`viewer: ${viewer.url}${only} (${runs.length} run${runs.length === 1 ? '' : 's'} in ${file}; Ctrl-C stops)\n`);
      await new Promise<void>((resolve) => {
        onShutdownSignals(logger, async () => {
          await viewer.close();
          resolve();
        }, { stopping: 'stopping the viewer' });
      });
    });
}
