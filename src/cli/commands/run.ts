/** `vcfleet run`: the whole evaluation on one machine, in one command. */
import type { Command } from 'commander';
import type { Cli } from '../context.ts';
import { InFlightJobs } from '../../shared/queue/in-flight-jobs.ts';
import { exitSoon, onShutdownSignals, stopOnFatal, table } from '../runtime.ts';
import { DemoRunToResume, runAll, type RunAllResult } from '../../all-in-one/run-all.ts';
import { runDemo } from '../../demo/run-demo.ts';
import { metricsRows, reportRows, type TableRow } from '../metrics-table.ts';
import { readPublishedResults, type PublishedRow } from '../../shared/output/published-results.ts';
import { vcfleetCommand } from '../../shared/text/advice.ts';
import { SETTINGS_HELP } from '../usage-hints.ts';
import { printAboveBar, terminalScreen } from '../../shared/text/terminal-screen.ts';
import { askedRunSettings } from '../../ops/asked-settings.ts';

/** Exit codes of `run` and `demo`: every rollout scored, some masked, some missing (stopped, stuck, paused). */
export const EXIT = { allScored: 0, someMasked: 3, incomplete: 4 } as const;

export function exitCodeOf(r: Pick<RunAllResult, 'status' | 'masked'>): number {
  if (r.status !== 'complete') return EXIT.incomplete;
  return r.masked > 0 ? EXIT.someMasked : EXIT.allScored;
}

/** One line that says how the run ended and what to do next. */
export function endingText(r: RunAllResult): string {
  const id = r.runId;
  switch (r.status) {
    case 'complete':
      return r.masked === 0
        ? `complete: all ${r.total} rollouts scored`
        : `complete, but ${r.masked} of ${r.total} rollouts are masked (left out of mean/reward): see \`${vcfleetCommand(`status --run-id ${id}`)}\`${maskedAdvice(r)}`;
    case 'paused':
      return `paused: ${r.reason ?? 'the policy server fails every call'}. Fix it, then resume with \`${vcfleetCommand(`run --run-id ${id}`)}\``;
    case 'stopped':
      return `stopped at ${r.done}/${r.total} rows; resume with \`${vcfleetCommand(`run --run-id ${id}`)}\``;
    case 'redis_lost':
      return `ended without its Redis: ${r.reason ?? 'Redis did not answer'}. Once Redis is back, resume with \`${vcfleetCommand(`run --run-id ${id}`)}\``;
    case 'stuck':
      return `incomplete: ${r.done}/${r.total} rows and nothing queued: see \`${vcfleetCommand(`status --run-id ${id}`)}\`, then \`${vcfleetCommand(`retry --run-id ${id}`)}\``;
  }
}

/**
 * What turns the masked rows of a finished run into scores, chosen from what is left: `rejudge` for
 * judge failures (graded again from the kept answer), `retry` for the rest (infrastructure failures,
 * run again); both when both kinds are left. A run whose metrics are unknown gets both.
 */
function maskedAdvice(r: RunAllResult): string {
  const byKind = r.metrics?.masked_by_kind;
  const judged = byKind ? (byKind.judge_failed ?? 0) > 0 : true;
  const other = byKind ? Object.entries(byKind).some(([kind, n]) => kind !== 'judge_failed' && n > 0) : true;
  const rejudge = `\`${vcfleetCommand(`rejudge --run-id ${r.runId}`)}\``;
  const retry = `\`${vcfleetCommand(`retry --run-id ${r.runId}`)}\``;
  if (judged && other) return `, then ${rejudge} (judge failures) and ${retry} (the others)`;
  return `, then ${judged ? rejudge : retry}`;
}

/** The summary table `run` and `demo` end with (the same metrics lines as `vcfleet metrics`). */
export function summaryText(r: RunAllResult, published: readonly PublishedRow[] = []): string {
  const lines: TableRow[] = [['run', r.runId], ['status', `${r.status} (${r.done}/${r.total} rollouts)`]];
  if (r.metrics) lines.push(...metricsRows(r.metrics), ...reportRows(r.metrics, published));
  lines.push(['rows', r.outputPath], ['metrics', r.metricsPath]);
  return table(lines);
}

/** The run id, first thing: it is what resumes the run after Ctrl-C or a crash. */
export function announceRun(runId: string, total: number, created: boolean): void {
  printAboveBar(`${created ? 'run' : 'resuming run'} ${runId}: ${total} rollouts (stop with Ctrl-C; resume with \`${vcfleetCommand(`run --run-id ${runId}`)}\`)\n`);
}

/** Print the summary and how the run ended; set the exit code. */
export function finish(result: RunAllResult, after = '', published: readonly PublishedRow[] = []): void {
  terminalScreen()?.endBar(); // the summary starts on a clean line
  process.stdout.write(`\n${summaryText(result, published)}\n\n${endingText(result)}\n${after}`);
  process.exitCode = exitCodeOf(result);
}

export function registerRun(program: Command, cli: Cli): void {
  program
    .command('run')
    .description('run the whole fleet on this machine: preflight, prepare, produce, every worker, progress, summary')
    .option('--config <path>', 'config YAML')
    .option('--benchmark <name>', 'babyvision_opencode or babyvision_opencode_question_only')
    .option('--run-id <id>', 'resume this run from Redis (or name a new one)')
    .option('--skip-preflight', 'do not check endpoints, keys, sandboxes and Redis first')
    .option('--update-settings', 'resume --run-id with the run settings given as ++key=value (refused once rollouts of it finished); without it, a difference is refused')
    .addHelpText('after', `${SETTINGS_HELP}\n\nExit codes: 0 every rollout scored, 3 some rollouts masked, 4 incomplete (stopped, stuck or paused), 2 bad config or a failed preflight.`)
    .action(async (opts: { config?: string; benchmark?: string; runId?: string; skipPreflight?: boolean; updateSettings?: boolean }) => {
      const flags = { benchmark: opts.benchmark, run_id: opts.runId, 'preflight.enabled': opts.skipPreflight ? false : undefined };
      const { config, logger } = cli.context(opts, flags, true);
      let runId = config.run_id ?? '';
      const onStart = (id: string, total: number, created: boolean) => {
        runId = id;
        announceRun(id, total, created);
      };
      const inFlight = new InFlightJobs();
      const signal = onShutdownSignals(logger, async () => {}, { hint: () => (runId ? `resume with: ${vcfleetCommand(`run --run-id ${runId}`)}` : ''), inFlight });
      let result: RunAllResult;
      try {
        const asked = askedRunSettings(cli.overrides, opts.benchmark ? ['benchmark'] : []);
        const newRun = vcfleetCommand(['run', '--run-id NEW', ...(opts.benchmark ? [`--benchmark ${opts.benchmark}`] : []), ...cli.overrides.filter((o) => asked.some((k) => o.startsWith(`++${k}=`)))].join(' '));
        const settings = { asked, update: Boolean(opts.updateSettings), newRun, updateFlag: '--update-settings' };
        result = await runAll({ config, logger, signal, onStart, inFlight, onFatalRedis: stopOnFatal, settings });
      } catch (err) {
        if (!(err instanceof DemoRunToResume)) throw err;
        result = (await runDemo({ configPath: opts.config, overrides: cli.overrides, logger, signal, onStart, runId: err.runId, inFlight })).result;
      }
      finish(result, '', readPublishedResults(config.report.published_results));
      exitSoon();
    });
}
