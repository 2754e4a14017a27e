/**
 * The leak guard fails a test file that leaves a server open, naming it, and passes the same file
 * once it closes its server: each fixture run by vitest as `npm test` runs a test file.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

function runFixture(name: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--config', 'test/helpers/fixtures/vitest.fixtures.config.ts', name], { cwd: ROOT, timeout: 60_000, env: { ...process.env, CI: '1' } }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: `${stdout}${stderr}` }),
    );
  });
}

describe('the leak guard', () => {
  it('fails a test file that leaves a server open, naming what it left', async () => {
    const run = await runFixture('leaky-server');
    expect(run.code, run.output).not.toBe(0);
    expect(run.output).toMatch(/this test file left open: 1 TCP server/);
  });

  it('passes the same test once it closes its server', async () => {
    const run = await runFixture('tidy-server');
    expect(run.code, run.output).toBe(0);
  });
});
