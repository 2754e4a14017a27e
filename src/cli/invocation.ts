/**
 * How the user invoked the CLI, so the commands it advises can be pasted as printed: `npx vcfleet`
 * when run through npx (`npm exec`), `npm run vcfleet --` through the package's script, `vcfleet`
 * when run as the installed bin on the PATH, else `node <path to bin/vcfleet.js>` (relative to the
 * working folder when inside it).
 */
import path from 'node:path';

export interface Invocation {
  env: Record<string, string | undefined>;
  /** The script node runs (`process.argv[1]`). */
  script: string | undefined;
  cwd: string;
}

export function commandPrefix(inv: Invocation = { env: process.env, script: process.argv[1], cwd: process.cwd() }): string {
  if (inv.env.npm_command === 'exec' || inv.env.npm_lifecycle_event === 'npx') return 'npx vcfleet';
  if (inv.env.npm_lifecycle_event === 'vcfleet') return 'npm run vcfleet --';
  const script = inv.script ?? '';
  if (path.basename(script) === 'vcfleet') return 'vcfleet';
  const rel = path.relative(inv.cwd, script);
  const shown = rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : script;
  return `node ${/^[\w@%+=:,./-]+$/.test(shown) ? shown : `'${shown.replace(/'/g, `'\\''`)}'`}`;
}
