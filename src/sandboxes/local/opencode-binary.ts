/**
 * Where the OpenCode binary is. This project depends on OpenCode's platform package
 * (`opencode-linux-x64@1.17.11`, the real Bun executable that the `opencode-ai` wrapper would link);
 * a project that installs `opencode-ai` instead is found too. The `local` sandbox mounts the
 * binary's folder read-only at the same path, so the same path works inside and outside; a folder
 * the sandbox's uid cannot reach is replaced by a readable copy (readable-copy.ts).
 */
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Config } from '../../shared/config/load.ts';
import { ConfigError } from '../../shared/errors.ts';
import { sandboxReadable } from './readable-copy.ts';

const require = createRequire(import.meta.url);

function platformPackages(): string[] {
  const os = process.platform === 'win32' ? 'windows' : process.platform;
  const arch = process.arch;
  const base = `opencode-${os}-${arch}`;
  return [base, `${base}-baseline`, `${base}-musl`, `${base}-baseline-musl`];
}

function findInstalledBinary(): string | null {
  const roots: string[] = [];
  try {
    roots.push(path.dirname(require.resolve('opencode-ai/package.json')));
  } catch {
    // opencode-ai not resolvable from here; platform packages may still be hoisted
  }
  for (const pkg of platformPackages()) {
    for (const from of [undefined, ...roots]) {
      try {
        const manifest = from ? require.resolve(`${pkg}/package.json`, { paths: [from] }) : require.resolve(`${pkg}/package.json`);
        const bin = path.join(path.dirname(manifest), 'bin', 'opencode');
        if (existsSync(bin)) return bin;
      } catch {
        // not installed
      }
    }
  }
  return null;
}

/**
 * The real path (symlinks followed) of the OpenCode binary: `agent.opencode_bin`, else the npm one;
 * for a root worker whose sandboxes (uid 100000) cannot reach it there (a checkout in a 0700 home),
 * its copy in a cache they can read (readable-copy.ts).
 */
export function opencodeBinaryPath(config: Pick<Config, 'agent'>): string {
  const configured = config.agent.opencode_bin;
  const candidate = configured ?? findInstalledBinary();
  if (!candidate) {
    throw new ConfigError(
      `OpenCode is not installed for ${process.platform}-${process.arch}: run \`npm ci\` on linux-x64 (it installs opencode-linux-x64@1.17.11), or set agent.opencode_bin (OPENCODE_BIN) to an OpenCode 1.17.11 binary`,
    );
  }
  if (!existsSync(candidate)) throw new ConfigError(`agent.opencode_bin: ${candidate} does not exist`);
  return sandboxReadable(realpathSync(candidate));
}

/** Host folders the `local` sandbox must expose read-only so that the binary runs inside it. */
export function opencodeRoBinds(config: Pick<Config, 'agent'>): string[] {
  return [path.dirname(opencodeBinaryPath(config))];
}
