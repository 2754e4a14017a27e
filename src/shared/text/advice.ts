/**
 * The commands the CLI advises ("then run `vcfleet …`"), written so that they work as printed: each
 * repeats what of this invocation says where its runs live — `--config <file>` and the `++key=value`
 * settings of Redis, the key prefix and the folders — so a run started with
 * `vcfleet run --config my.yaml ++queues.prefix=exp7` is advised `vcfleet rejudge --run-id R --config
 * my.yaml ++queues.prefix=exp7`, not a command that looks for it elsewhere. A setting that carries a
 * password is never repeated (advice is printed and logged); the user's environment (REDIS_URL,
 * VCFLEET_CONFIG, …) carries over by itself.
 */

/** Settings that say where a run lives: which Redis, which keys, which folders. */
const LOCATING = /^(redis_url|redis\.[a-z_]+|queues\.prefix|state_dir|output_root|data_dir|output_jsonl_fpath)$/;

let tail = '';
/** How this invocation runs the CLI (cli/invocation.ts): `npx vcfleet`, `vcfleet`, `node bin/vcfleet.js`. */
let prefix = 'vcfleet';

/** Set once by the CLI's entry point: the words that start every command it advises. */
export function adviseAs(commandPrefix: string): void {
  prefix = commandPrefix;
}

/** The words that start an advised command (`npx vcfleet`, `vcfleet`, `node bin/vcfleet.js`). */
export function cliName(): string {
  return prefix;
}

/** A word as a POSIX shell reads it back unchanged. */
export function shellWord(word: string): string {
  return /^[\w@%+=:,./{}-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** Called once per invocation (cli/context.ts): the `--config` and `++` settings its advice repeats. */
export function adviseWith(invocation: { configPath?: string; overrides: readonly string[] }): void {
  const words: string[] = [];
  if (invocation.configPath) words.push('--config', shellWord(invocation.configPath));
  for (const override of invocation.overrides) {
    const eq = override.indexOf('=');
    const key = override.slice(2, eq < 0 ? undefined : eq);
    const value = eq < 0 ? '' : override.slice(eq + 1);
    if (!LOCATING.test(key) || /password/i.test(key) || /^[a-z+]+:\/\/[^/@]*:[^/@]*@/i.test(value)) continue;
    words.push(shellWord(override));
  }
  tail = words.length > 0 ? ` ${words.join(' ')}` : '';
}

/** `vcfleet <rest>` (as this invocation ran the CLI) with its locating settings. */
export function vcfleetCommand(rest: string): string {
  return `${prefix} ${rest}${tail}`;
}
