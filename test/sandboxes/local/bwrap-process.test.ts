/**
 * A host without bubblewrap: the `local` provider's probe names it in one line with its apt package
 * (not the launcher's "spawn bwrap ENOENT … must be an absolute path" or every limit failing), and
 * `vcfleet demo`, the README's first command, exits 2 with that line. Which bwrap is used:
 * `VCFLEET_BWRAP`, else `/usr/bin/bwrap`, else the first on the PATH (absolute).
 */
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/shared/errors.ts';
import { defaultBwrapPath } from '../../../src/sandboxes/local/bwrap-process.ts';
import { LocalBwrapProvider } from '../../../src/sandboxes/local/provider.ts';
import { runCli } from '../../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';

afterAll(removeTmpDirs);

describe('bubblewrap missing', () => {
  it('which bwrap: VCFLEET_BWRAP, else /usr/bin/bwrap, else the PATH\'s as an absolute path, else `bwrap`', () => {
    expect(defaultBwrapPath({ VCFLEET_BWRAP: '/opt/bw/bwrap', PATH: '/usr/bin' })).toBe('/opt/bw/bwrap');
    const dir = createTmpDir('vcfleet-bwrap-path-');
    const own = path.join(dir, 'bin');
    mkdirSync(own);
    writeFileSync(path.join(own, 'bwrap'), '#!/bin/sh\n');
    chmodSync(path.join(own, 'bwrap'), 0o755);
    const usr = existsSync('/usr/bin/bwrap');
    expect(defaultBwrapPath({ PATH: `relative/bin:${own}` })).toBe(usr ? '/usr/bin/bwrap' : path.join(own, 'bwrap'));
    if (!usr) expect(defaultBwrapPath({ PATH: dir })).toBe('bwrap');
  });

  it('the provider\'s probe: a ConfigError naming `apt-get install bubblewrap`, before any limit is tried', async () => {
    const root = createTmpDir('vcfleet-nobwrap-');
    for (const bwrapPath of ['/nonexistent/bwrap', 'bwrap-not-installed']) {
      const provider = new LocalBwrapProvider({ workdir: '/workspace', rootDir: path.join(root, 'sandboxes'), bwrapPath });
      const err = await provider.probe().then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      const message = (err as Error).message;
      expect(message).toContain(`bubblewrap is not installed (no ${bwrapPath}`);
      expect(message).toContain('`apt-get install bubblewrap`');
      expect(message).not.toMatch(/absolute path|ENOENT|host uid/);
      await provider.close();
    }
  });

  it('vcfleet demo without it: exit 2 and one line naming `apt-get install bubblewrap`', async () => {
    const dir = createTmpDir('vcfleet-nobwrap-demo-');
    const r = await runCli(['demo', `++state_dir=${path.join(dir, 'state')}`, `++output_root=${path.join(dir, 'results')}`, `++data_dir=${path.join(dir, 'data')}`], { VCFLEET_BWRAP: path.join(dir, 'no-bwrap') });
    expect(r.code, r.output).toBe(2);
    const lines = r.output.split('\n').filter((l) => l.includes('bubblewrap'));
    expect(lines).toEqual([`vcfleet: bubblewrap is not installed (no ${path.join(dir, 'no-bwrap')}): the local sandboxes need it; install it with \`apt-get install bubblewrap\` (Debian/Ubuntu), or use ++sandbox_provider=opensandbox`]);
  }, 120_000);
});
