/**
 * What every command shares: the `++key=value` overrides split off argv before commander sees them,
 * config loading with `--config`, and a logger that redacts the config's secrets.
 */
import { loadConfig, secretValues, type Config } from '../shared/config.ts';
import { createLogger, type Logger } from '../shared/logger.ts';

let overrides: string[] = [];

export function setOverrides(values: string[]): void {
  overrides = values;
}

/** The `++key=value` overrides of this invocation. */
export function currentOverrides(): readonly string[] {
  return overrides;
}

export interface CommandContext {
  config: Config;
  logger: Logger;
}

/**
 * Load the config for a command; `flags` are values set by the command's own options. With
 * `progressBar`, info lines are held back on a terminal so they do not tear the bar (warnings and
 * errors still show; set log_level=debug to see everything).
 */
export function commandContext(opts: { config?: string }, flags: Record<string, unknown> = {}, progressBar = false): CommandContext {
  const config = loadConfig({ configPath: opts.config, overrides, flags });
  const level = progressBar && process.stderr.isTTY && config.log_level === 'info' ? 'warn' : config.log_level;
  const logger = createLogger({ level, secrets: secretValues(config), name: 'vcfleet' });
  return { config, logger };
}
