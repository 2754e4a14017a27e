/**
 * Two `vcfleet demo` in one folder, the second started while the first runs (as evaluators run two
 * models side by side from one checkout): both use the folder's private Redis (no REDIS_URL), the
 * first to end leaves it to the second, both complete with exit 0, and the last to leave stops it.
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startCli, waitFor } from '../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';

describe('two demos in one folder', () => {
  afterAll(removeTmpDirs);

  it('share the private Redis; neither loses it when the other ends', async () => {
    const dir = createTmpDir('vcfleet-demo2-');
    const config = path.join(dir, 'vcfleet.yaml');
    writeFileSync(config, `state_dir: ${path.join(dir, 'state')}\noutput_root: ${dir}\n`);
    const env = { TMPDIR: dir, VCFLEET_CONFIG: config };
    // One puzzle at a time: the first still runs when the second comes.
    const first = startCli(['demo', '++queues.rollout_concurrency=1'], env);
    await waitFor('the first demo to run its puzzles', async () => /demo run demo-[\w-]+: 4 synthetic puzzles/.test(first.output()), 120_000, 200);
    const second = startCli(['demo'], env);
    try {
      expect(await first.exited, first.output()).toBe(0);
      expect(await second.exited, second.output()).toBe(0);
    } finally {
      for (const p of [first, second]) if (p.child.exitCode === null) p.child.kill('SIGKILL');
    }
    expect(second.output()).toContain('using the private redis-server another vcfleet command runs');
    for (const p of [first, second]) {
      expect(p.stdout()).toContain('complete: all 4 rollouts scored');
      expect(p.output()).not.toContain('lost the connection to Redis');
    }
    expect(existsSync(path.join(dir, 'state', 'redis', 'server.json'))).toBe(false);
  }, 400_000);
});
