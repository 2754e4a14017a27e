/**
 * Admission's memory pressure on a cgroup v1 host, against the real kernel: the worker's own memory
 * cgroup reports reclaim pressure when it is itself short of memory, and not when a sandbox under it
 * thrashes within its own limit (so one sandbox cannot stop the worker taking rollouts). Needs root
 * and a writable v1 memory hierarchy; skipped with the reason otherwise.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/shared/logger.ts';
import { pressureShare, watchV1Pressure, type PressureWatch } from '../../../src/workers/sandbox/v1-pressure.ts';
import { waitFor } from '../../helpers/wait.ts';

const V1 = '/sys/fs/cgroup/memory';
const usable = process.getuid?.() === 0 && existsSync(path.join(V1, 'memory.pressure_level'));
const WORKER = path.join(V1, `vcfleet-pressure-test-${process.pid}`);
const SANDBOX = path.join(WORKER, 'sandbox');
const logger = createLogger({ level: 'silent' });

/** Allocate `mib` MiB in a process of cgroup `dir` (limited to `limitMib`); it may be OOM-killed, that is fine. */
function squeeze(dir: string, limitMib: number, mib: number): void {
  writeFileSync(path.join(dir, 'memory.limit_in_bytes'), String(limitMib * 1024 * 1024));
  spawnSync('/bin/sh', ['-c', `echo $$ > ${dir}/cgroup.procs && exec python3 -c "b=[bytearray(1 << 20) for _ in range(${mib})]"`], { stdio: 'ignore', timeout: 60_000 });
}

describe('pressureShare', () => {
  it('is the share of the last 10 one-second slots that saw an event', () => {
    const now = 100_000;
    expect(pressureShare([], now)).toBe(0);
    expect(pressureShare([now - 100, now - 200, now - 300], now)).toBe(10);
    expect(pressureShare([now - 500, now - 1500, now - 9500, now - 12_000], now)).toBe(30);
  });
});

describe.skipIf(!usable)('the worker\'s own memory pressure on cgroup v1 (real kernel)', () => {
  let watch: PressureWatch | null = null;
  afterAll(() => {
    watch?.stop();
    for (const dir of [SANDBOX, WORKER]) if (existsSync(dir)) rmdirSync(dir);
  });

  it('a sandbox thrashing within its own limit is not the worker\'s pressure; the worker short of memory is', async () => {
    mkdirSync(SANDBOX, { recursive: true });
    watch = await watchV1Pressure(WORKER, logger);
    expect(watch).not.toBeNull();
    squeeze(SANDBOX, 64, 256);
    // Nothing may come of it: watched for as long as the worker's own squeeze below takes to show.
    await sleep(300);
    expect(watch!.pct()).toBe(0);
    squeeze(WORKER, 64, 256);
    await waitFor('the worker\'s own pressure', () => watch!.pct() > 0, 10_000, 50);
  });
});
