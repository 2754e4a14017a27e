/**
 * What a root worker's sandboxes bind must be readable by their uid wherever the checkout is: a file
 * under a 0700 folder (a clone in root's home) is copied once, by content, to a cache nobody else may
 * write; a file others can reach is used where it is; a cache someone else may write is refused.
 * And the sandboxes' uid, through the provider's trial (bwrap as uid 100000), reads the copy.
 */
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { othersCanReach, sandboxReadable } from '../../../src/sandboxes/local/readable-copy.ts';
import { LocalBwrapProvider } from '../../../src/sandboxes/local/provider.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';

afterAll(removeTmpDirs);

/** A `home` of mode 0700 with an executable `checkout/bin/tool` in it, as a clone in root's home. */
function privateCheckout(): { home: string; tool: string } {
  const home = createTmpDir('vcfleet-home-');
  const bin = path.join(home, 'checkout', 'bin');
  mkdirSync(bin, { recursive: true });
  const tool = path.join(bin, 'tool');
  writeFileSync(tool, '#!/bin/sh\necho tool-ran\n');
  chmodSync(tool, 0o755);
  chmodSync(home, 0o700);
  return { home, tool };
}

describe('sandbox-readable copies', () => {
  it('a file under a 0700 folder: copied once to <cache>/<sha256>/<name>, 0755, same bytes; a reachable file stays where it is', () => {
    const { tool } = privateCheckout();
    expect(othersCanReach(tool)).toBe(false);
    const cache = path.join(createTmpDir('vcfleet-cache-'), 'readable');
    const copy = sandboxReadable(tool, cache, true);
    const sha = createHash('sha256').update(readFileSync(tool)).digest('hex');
    expect(copy).toBe(path.join(cache, sha, 'tool'));
    expect(readFileSync(copy, 'utf8')).toBe(readFileSync(tool, 'utf8'));
    expect(statSync(copy).mode & 0o777).toBe(0o755);
    expect(othersCanReach(copy)).toBe(true);
    const made = statSync(copy).mtimeMs;
    expect(sandboxReadable(tool, cache, true)).toBe(copy);
    expect(statSync(copy).mtimeMs).toBe(made); // not copied again
    // Reachable, or not a root worker: where it is.
    const open = path.join(createTmpDir('vcfleet-open-'), 'tool');
    writeFileSync(open, 'x');
    chmodSync(open, 0o755);
    expect(sandboxReadable(open, cache, true)).toBe(open);
    expect(sandboxReadable(tool, cache, false)).toBe(tool);
  });

  it('a cache folder others may write to is refused, naming it', () => {
    const { tool } = privateCheckout();
    const cache = path.join(createTmpDir('vcfleet-cache-'), 'open');
    mkdirSync(cache);
    chmodSync(cache, 0o777);
    expect(() => sandboxReadable(tool, cache, true)).toThrow(`${cache} must be a folder of uid`);
  });

  it.skipIf(process.geteuid?.() !== 0)('the sandboxes\' uid (100000) reads the copy: the provider\'s trial passes with it, fails with the original', async () => {
    const { tool } = privateCheckout();
    const cache = path.join(createTmpDir('vcfleet-cache-'), 'readable');
    const copy = sandboxReadable(tool, cache, true);
    const root = createTmpDir('vcfleet-readable-sbx-');
    const trial = async (file: string) => {
      const provider = new LocalBwrapProvider({ workdir: '/workspace', rootDir: path.join(root, path.basename(path.dirname(file))), extraRoBinds: [path.dirname(file)] });
      try {
        return (await provider.probe()).user;
      } finally {
        await provider.close();
      }
    };
    const copied = await trial(copy);
    expect(copied.enforced, copied.detail).toBe(true);
    expect(copied.detail).toContain('runs as host uid and gid 100000');
    const original = await trial(tool);
    expect(original.enforced).toBe(false);
    expect(original.detail).toMatch(/cannot run sandboxes as host uid 100000 .*Can't find source path .*: Permission denied/);
  }, 60_000);
});
