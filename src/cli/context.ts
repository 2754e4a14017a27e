/**
 * What every command shares: the `++key=value` overrides of this invocation (split off argv before
 * commander sees them), config loading with `--config`, and a logger that redacts the config's
 * secrets. One `Cli` per invocation, handed to every command as it registers.
 */
import { loadConfig, secretValues, type Config } from '../shared/config/load.ts';
import { createLogger, type Logger } from '../shared/logger.ts';
import { adviseWith } from '../shared/text/advice.ts';
import { openTerminalScreen, screenDestination } from '../shared/text/terminal-screen.ts';

export interface CommandContext {
  config: Config;
  logger: Logger;
}

export class Cli {
  /** The config the running command loaded (for `debug` when it fails). */
  private loaded: Config | null = null;

  constructor(readonly overrides: readonly string[]) {}

  /**
   * Load the config for a command; `flags` are values set by the command's own options. With
   * `progressBar`, on a terminal, one screen owns it (shared/text/terminal-screen.ts): log lines print on
   * one line above the bar, repeated warnings fold into a count on the bar, and info lines are held
   * back (set log_level=debug to see everything).
   */
  context(opts: { config?: string }, flags: Record<string, unknown> = {}, progressBar = false): CommandContext {
    const config = loadConfig({ configPath: opts.config, overrides: this.overrides, flags });
    adviseWith({ configPath: opts.config, overrides: this.overrides });
    this.loaded = config;
    const level = progressBar && process.stderr.isTTY && config.log_level === 'info' ? 'warn' : config.log_level;
    const screen = progressBar && process.stderr.isTTY && !config.log_json ? openTerminalScreen() : null;
    const destination = screen ? screenDestination(screen) : undefined;
    const logger = createLogger({ level, secrets: secretValues(config), name: 'vcfleet', json: config.log_json, destination });
    return { config, logger };
  }

  /** Whether the command's config asked for stack traces (`debug`, `VCFLEET_DEBUG`). */
  get debug(): boolean {
    return this.loaded?.debug ?? false;
  }
}
