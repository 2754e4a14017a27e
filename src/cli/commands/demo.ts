/** `vcfleet demo`: the first command a newcomer runs. */
import type { Command } from 'commander';
import type { Cli } from '../context.ts';
import { InFlightJobs } from '../../shared/queue/in-flight-jobs.ts';
import { onShutdownSignals } from '../runtime.ts';
import { runDemo, nextSteps } from '../../demo/run-demo.ts';
import { finish } from './run.ts';
import { vcfleetCommand } from '../../shared/text/advice.ts';
import { SETTINGS_HELP } from '../usage-hints.ts';
import { printAboveBar } from '../../shared/text/terminal-screen.ts';

export function registerDemo(program: Command, cli: Cli): void {
  program
    .command('demo')
    .description('a self-contained run on bundled synthetic puzzles: scripted policy and judge, real OpenCode in local sandboxes, no network')
    .option('--config <path>', 'config YAML')
    .option('--run-id <id>', 'resume this demo run')
    .addHelpText('after', `${SETTINGS_HELP}\n\nThe demo itself needs none of these: it starts its own scripted policy and judge on loopback.`)
    .action(async (opts: { config?: string; runId?: string }) => {
      const { logger } = cli.context(opts, {}, true);
      let runId = opts.runId ?? '';
      const inFlight = new InFlightJobs();
      const signal = onShutdownSignals(logger, async () => {}, { hint: () => (runId ? `resume with: ${vcfleetCommand(`demo --run-id ${runId}`)}` : ''), inFlight });
      const { result } = await runDemo({
        configPath: opts.config,
        overrides: cli.overrides,
        logger,
        signal,
        inFlight,
        runId: opts.runId,
        onStart: (id, total, created) => {
          runId = id;
          printAboveBar(`${created ? 'demo run' : 'resuming demo run'} ${id}: ${total} synthetic puzzles through the real OpenCode (stop with Ctrl-C; resume with \`${vcfleetCommand(`demo --run-id ${id}`)}\`)\n`);
        },
      });
      finish(result, result.status === 'complete' ? nextSteps() : '');
    });
}
