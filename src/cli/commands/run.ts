/** `vcfleet run`: the whole evaluation on one machine, in one command. */
import type { Command } from 'commander';
import type { Cli } from '../context.ts';
import { onShutdownSignals, table } from '../runtime.ts';
import { runAll, type RunAllResult } from '../../all-in-one/run-all.ts';

export function summaryText(r: RunAllResult): string {
  const m = r.metrics;
  const pct = (x: number | null | undefined) => (x === null || x === undefined ? '-' : `${(100 * x).toFixed(1)}%`);
  const lines: Array<Array<string | number>> = [
    ['run', r.runId],
    ['status', `${r.status} (${r.done}/${r.total} rollouts)`],
  ];
  if (m) {
    lines.push(
      ['mean/reward', `${pct(m['mean/reward'])}${m['mean/reward_ci95'] ? `  [95% CI ${pct(m['mean/reward_ci95'][0])} - ${pct(m['mean/reward_ci95'][1])}]` : ''}`],
      ['strict/reward', pct(m['strict/reward'])],
      ['scored / masked', `${m.num_scored} / ${m.num_masked}${m.num_masked ? ` (${Object.entries(m.masked_by_kind).map(([k, v]) => `${k} ${v}`).join(', ')})` : ''}`],
      ['stop reasons', Object.entries(m.stop_reasons).map(([k, v]) => `${k} ${v}`).join(', ') || '-'],
    );
    for (const [type, g] of Object.entries(m.accuracy_by_type)) lines.push([`  ${type}`, `${pct(g.accuracy)} (${g.scored} scored)`]);
  }
  lines.push(['rows', r.outputPath], ['metrics', r.metricsPath]);
  return table(lines);
}

/** The run id, first thing: it is what resumes the run after Ctrl-C or a crash. */
export function announceRun(runId: string, total: number, created: boolean): void {
  process.stderr.write(`${created ? 'run' : 'resuming run'} ${runId}: ${total} rollouts (stop with Ctrl-C; resume with \`vcfleet run --run-id ${runId}\`)\n`);
}

export function registerRun(program: Command, cli: Cli): void {
  program
    .command('run')
    .description('run the whole fleet on this machine: prepare, produce, every worker, progress, summary')
    .option('--config <path>', 'config YAML')
    .option('--benchmark <name>', 'babyvision_opencode or babyvision_opencode_question_only')
    .option('--run-id <id>', 'resume this run (or name a new one)')
    .action(async (opts: { config?: string; benchmark?: string; runId?: string }) => {
      const { config, logger } = cli.context(opts, { benchmark: opts.benchmark, run_id: opts.runId }, true);
      const signal = onShutdownSignals(logger, async () => {});
      const result = await runAll({ config, logger, signal, onStart: announceRun });
      process.stdout.write(`\n${summaryText(result)}\n`);
      if (result.status === 'stopped') {
        process.stdout.write(`\nstopped; resume with: vcfleet run --run-id ${result.runId}\n`);
        process.exitCode = 130;
      } else if (result.status === 'stuck') {
        process.stdout.write(`\nrows are missing and nothing is queued: see \`vcfleet status --run-id ${result.runId}\`, then \`vcfleet retry --run-id ${result.runId}\`\n`);
        process.exitCode = 1;
      }
    });
}
