/**
 * How the user invoked the CLI, so the commands it advises can be pasted as printed: the launcher as
 * typed (`./vcfleet`, the documented way; `VCFLEET_LAUNCHER` is set by it), `./vcfleet` too when run
 * through npx (`npm exec`) from a checkout that has the launcher (npx is not transparent to signals
 * and exit codes; elsewhere `npx vcfleet`), `npm run vcfleet --` through the package's script,
 * `vcfleet` when run as the installed bin on the PATH, else `node <path to bin/vcfleet.js>` (relative
 * to the working folder when inside it).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';

export interface Invocation {
  env: Record<string, string | undefined>;
  /** The script node runs (`process.argv[1]`). */
  script: string | undefined;
  cwd: string;
  /** The checkout's launcher (`<root>/vcfleet`) when it has one; default: this checkout's. */
  launcher?: string | null;
}

const quoted = (word: string) => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`);

function checkoutLauncher(): string | null {
  const file = path.resolve(import.meta.dirname, '../../vcfleet');
  return existsSync(file) ? file : null;
}

/** A path as typed in `cwd`: relative (`./x`, `../x`) when `cwd` is inside the checkout, else absolute. */
function typedPath(file: string, cwd: string): string {
  const rel = path.relative(cwd, file);
  if (!rel || path.isAbsolute(rel) || rel.split(path.sep).filter((p) => p === '..').length > 2) return file;
  return rel.startsWith('..') ? rel : `./${rel}`;
}

export function commandPrefix(inv: Invocation = { env: process.env, script: process.argv[1], cwd: process.cwd() }): string {
  const typed = inv.env.VCFLEET_LAUNCHER;
  if (typed) {
    const dir = path.dirname(typed);
    const onPath = (inv.env.PATH ?? '').split(':').some((p) => p && path.resolve(p) === path.resolve(inv.cwd, dir));
    if (onPath && path.basename(typed) === 'vcfleet' && typed.includes('/')) return 'vcfleet';
    return quoted(typed.includes('/') ? typed : `./${typed}`);
  }
  if (inv.env.npm_command === 'exec' || inv.env.npm_lifecycle_event === 'npx') {
    const launcher = inv.launcher === undefined ? checkoutLauncher() : inv.launcher;
    return launcher ? quoted(typedPath(launcher, inv.cwd)) : 'npx vcfleet';
  }
  if (inv.env.npm_lifecycle_event === 'vcfleet') return 'npm run vcfleet --';
  const script = inv.script ?? '';
  if (path.basename(script) === 'vcfleet') return 'vcfleet';
  const rel = path.relative(inv.cwd, script);
  const shown = rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : script;
  return `node ${quoted(shown)}`;
}
