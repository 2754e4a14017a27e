/** `vcfleet demo`: the first command a newcomer runs. */
import type { Command } from 'commander';
import type { Cli } from '../context.ts';
import { onShutdownSignals } from '../runtime.ts';
import { runDemo, NEXT_STEPS } from '../../demo/run-demo.ts';
import { summaryText } from './run.ts';

export function registerDemo(program: Command, cli: Cli): void {
  program
    .command('demo')
    .description('a self-contained run on bundled synthetic puzzles: scripted policy and judge, real OpenCode in local sandboxes, no network')
    .option('--config <path>', 'config YAML')
    .action(async (opts: { config?: string }) => {
      const { logger } = cli.context(opts, {}, true);
      const signal = onShutdownSignals(logger, async () => {});
      const { result } = await runDemo({
        configPath: opts.config,
        overrides: cli.overrides,
        logger,
        signal,
        onStart: (runId, total) => process.stderr.write(`demo run ${runId}: ${total} synthetic puzzles through the real OpenCode\n`),
      });
      process.stdout.write(`\n${summaryText(result)}\n${NEXT_STEPS}`);
      if (result.status !== 'complete') process.exitCode = result.status === 'stopped' ? 130 : 1;
    });
}
