/** `vcfleet <command>`: every role of the fleet, and the one-command run. */
import { Command, CommanderError } from 'commander';
import { splitOverrides } from '../shared/config/load.ts';
import { ConfigError, DataError, errorMessage } from '../shared/errors.ts';
import { Cli } from './context.ts';
import { COMMANDS } from './commands/index.ts';
import { commandPrefix } from './invocation.ts';
import { adviseAs, cliName, shellWord } from '../shared/text/advice.ts';
import { AddressInUseError } from '../http/listen.ts';
import { refuseMistypedSettings, refuseUnknownOptions } from './usage-hints.ts';
import { readFileSync } from 'node:fs';

/** This package's version, from its package.json. */
function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** Commander's codes for help and the version, printed as asked (exit 0). */
const HELP = new Set(['commander.helpDisplayed', 'commander.help', 'commander.version']);

export function buildProgram(cli: Cli = new Cli([])): Command {
  const program = new Command('vcfleet')
    .description(
      'Evaluate a vision-language policy on BabyVision with OpenCode in sandboxes, on a Redis + BullMQ fleet.\n' +
        'Any config key can be overridden as ++key=value (dotted keys for nested settings).',
    )
    .version(packageVersion(), '-V, --version', 'print the version of vcfleet')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  for (const register of COMMANDS) register(program, cli);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  adviseAs(commandPrefix());
  // Said once, to this process: what it starts (a child vcfleet, the demo's servers) was not typed so.
  delete process.env.VCFLEET_LAUNCHER;
  const { overrides, rest } = splitOverrides(argv.slice(2));
  const cli = new Cli(overrides);
  const program = buildProgram(cli);
  try {
    // The options of the command at hand (`runs --limit=5` is its option; `run --limit=2` a mistyped setting).
    const command = program.commands.find((c) => c.name() === rest[0] || c.aliases().includes(rest[0] ?? ''));
    const options = new Set((command?.options ?? []).map((o) => o.long ?? '').filter(Boolean));
    refuseMistypedSettings(rest, options);
    if (command) refuseUnknownOptions(command.name(), rest.slice(1), options);
    await program.parseAsync(rest, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      // A command line commander refused (an unknown command, a missing argument) is a bad configuration: exit 2.
      process.exitCode = err.exitCode === 0 || HELP.has(err.code) ? err.exitCode : 2;
      return;
    }
    if (err instanceof AddressInUseError) {
      process.stderr.write(`vcfleet: ${err.message}; ${portAdvice(program, [...rest, ...overrides], err.port)}\n`);
      process.exitCode = 2;
      return;
    }
    if (err instanceof ConfigError || err instanceof DataError) {
      process.stderr.write(`vcfleet: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    process.stderr.write(`vcfleet: ${errorMessage(err)}\n`);
    if (cli.debug) process.stderr.write(`${(err as Error).stack}\n`);
    process.exitCode = 1;
  }
}

/** For a taken port: the same command with `--port 0` (any free port; it prints the one it took) when it was the command's `--port`. */
function portAdvice(program: Command, rest: readonly string[], port: number): string {
  const command = program.commands.find((c) => c.name() === rest[0]);
  const asked = command?.options.some((o) => o.long === '--port') ? Number(command.opts().port) : NaN;
  if (asked !== port) return 'stop what listens there, or change the port in the configuration';
  const words = rest.filter((w, i) => !(w === '--port' || w.startsWith('--port=') || rest[i - 1] === '--port'));
  return `stop it, or take any free port (it prints the one it took): \`${[cliName(), ...words, '--port', '0'].map((w, i) => (i === 0 ? w : shellWord(w))).join(' ')}\``;
}
