/**
 * Admission by memory. The reader: what the host and the worker's cgroup (v2 and v1, fake trees)
 * leave for sandboxes, and the kernel's memory pressure. The slots of `auto`. And a real
 * sandbox-worker on the session's Redis whose host runs out of room mid-run: it hands the job back
 * with its attempt kept, takes nothing more, says so once (log, state for the progress line and
 * Prometheus), and takes rollouts again when memory frees; every rollout still gets one row.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { produceRun } from '../../../src/producer/produce.ts';
import { loadPreparedBenchmark } from '../../../src/prepare/load-prepared.ts';
import { ConfigSchema } from '../../../src/shared/config/schema.ts';
import { ConfigError } from '../../../src/shared/errors.ts';
import { openQueue } from '../../../src/shared/queue/registry.ts';
import { createRedis, type Redis } from '../../../src/shared/redis/connect.ts';
import { RunStore } from '../../../src/shared/stores/run-store.ts';
import { autoSlots, MemoryAdmission } from '../../../src/workers/sandbox/admission.ts';
import type { AdmissionState } from '../../../src/shared/ports/telemetry.ts';
import { readHostMemory, type HostMemory } from '../../../src/workers/sandbox/host-memory.ts';
import { createScriptedAgent } from '../../../src/agent/scripted-agent.ts';
import { startSandboxWorker } from '../../../src/workers/sandbox/worker.ts';
import { fakeHost, OTHER_MOUNTS, V2_ROOT_MOUNT, v1Mount } from '../../helpers/fake-cgroup.ts';
import { makeFleetEnv, REDIS_URL, waitFor, type FleetEnv } from '../../helpers/fleet.ts';
import { removeTmpDirs } from '../../helpers/tmp.ts';

const GIB = 1024 ** 3;
const meminfo = (totalKb: number, availableKb: number) => `MemTotal:       ${totalKb} kB\nMemFree:        1000 kB\nMemAvailable:   ${availableKb} kB\n`;

function withProcFiles(host: ReturnType<typeof fakeHost>, mem: string, pressure?: string) {
  writeFileSync(path.join(host.dir, 'meminfo'), mem);
  if (pressure !== undefined) writeFileSync(path.join(host.dir, 'pressure'), pressure);
  return { ...host, meminfo: path.join(host.dir, 'meminfo'), pressure: path.join(host.dir, 'pressure') };
}

afterAll(removeTmpDirs);

describe('readHostMemory', () => {
  it('cgroup v2: the tightest limit at or above the worker, its free part, and the cgroup\'s own pressure', async () => {
    const host = withProcFiles(
      fakeHost('0::/fleet/worker\n', [...OTHER_MOUNTS, V2_ROOT_MOUNT], {
        'cgroup.controllers': 'cpu memory pids\n',
        'fleet/cgroup.controllers': 'cpu memory pids\n',
        'fleet/memory.max': `${6 * GIB}\n`,
        'fleet/memory.current': `${5 * GIB}\n`,
        'fleet/worker/cgroup.controllers': 'cpu memory pids\n',
        'fleet/worker/memory.max': 'max\n',
        'fleet/worker/memory.current': `${GIB}\n`,
        'fleet/worker/memory.pressure': 'some avg10=31.50 avg60=2.00 avg300=0.50 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n',
      }),
      meminfo(32 * 1024 * 1024, 20 * 1024 * 1024),
      'some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n',
    );
    expect(await readHostMemory(host)).toEqual({ totalMib: 6144, availableMib: 1024, source: `cgroup ${path.join(host.sys, 'fleet')}`, pressurePct: 31.5 });
  });

  it('cgroup v1 with a limit on the worker\'s own cgroup; its own pressure (the v1 reader), never the host\'s file', async () => {
    const host = withProcFiles(
      fakeHost('9:memory:/ci/job\n8:pids:/\n0::/\n', [...OTHER_MOUNTS, v1Mount('memory')], {
        'memory/ci/job/memory.limit_in_bytes': `${3 * GIB}\n`,
        'memory/ci/job/memory.usage_in_bytes': `${GIB}\n`,
        'memory/ci/memory.limit_in_bytes': '9223372036854771712\n',
        'memory/memory.limit_in_bytes': '9223372036854771712\n',
      }),
      meminfo(24 * 1024 * 1024, 22 * 1024 * 1024),
      'some avg10=4.25 avg60=0.00 avg300=0.00 total=0\n',
    );
    // The host-wide PSI (4.25) would count every sandbox's own thrashing: not read on v1.
    expect(await readHostMemory(host)).toMatchObject({ totalMib: 3072, availableMib: 2048, pressurePct: null });
    const asked: string[] = [];
    const own = await readHostMemory(host, (folder) => (asked.push(folder), 30));
    expect(own).toMatchObject({ totalMib: 3072, pressurePct: 30 });
    expect(asked).toEqual([path.join(host.sysfsRoot, 'memory/ci/job')]);
  });

  it('no cgroup limit and no pressure reporting: the host\'s MemTotal and MemAvailable', async () => {
    const host = withProcFiles(fakeHost('0::/\n', [...OTHER_MOUNTS], {}), meminfo(16 * 1024 * 1024, 9 * 1024 * 1024));
    expect(await readHostMemory({ ...host, pressure: path.join(host.dir, 'none') })).toEqual({ totalMib: 16384, availableMib: 9216, source: 'this host (/proc/meminfo)', pressurePct: null });
  });

  it('reads this machine without throwing', async () => {
    const m = await readHostMemory();
    expect(m.totalMib).toBeGreaterThan(0);
    expect(m.availableMib).toBeLessThanOrEqual(m.totalMib);
  });
});

describe('auto slots', () => {
  const quiet = pino({ level: 'silent' });
  const config = (over: Record<string, unknown> = {}) => ConfigSchema.parse({ sandbox_config: { resources: { memory_mib: 1024 } }, queues: { memory_reserve_mib: 1024 }, ...over });

  it('count sandboxes at their limit in what the worker may use, less the reserve', async () => {
    expect(autoSlots({ totalMib: 24576 }, 1024, 1024)).toBe(23);
    expect(autoSlots({ totalMib: 24576 }, 8192, 1024)).toBe(2);
    const admission = new MemoryAdmission(config(), true, quiet, () => {}, async () => ({ totalMib: 4096, availableMib: 4000, source: 'x', pressurePct: null }));
    expect(await admission.slots('auto')).toBe(3);
    expect(await admission.slots(5)).toBe(5); // a number stays a number
  });

  it('a host that cannot hold one sandbox is an error that says what to lower', async () => {
    const admission = new MemoryAdmission(config(), true, quiet, () => {}, async () => ({ totalMib: 1500, availableMib: 1400, source: 'cgroup /sys/fs/cgroup/x', pressurePct: null }));
    const err = await admission.slots('auto').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/cgroup \/sys\/fs\/cgroup\/x has 1,500 MiB, not enough for one sandbox of 1,024 MiB \(sandbox_config.resources.memory_mib\) plus the 1,024 MiB reserve/);
  });

  it('with sandboxes on OpenSandbox, this host\'s memory neither sets slots nor gates sessions', async () => {
    const remote = new MemoryAdmission(config({ sandbox_provider: 'opensandbox' }), false, quiet, () => {}, async () => ({ totalMib: 512, availableMib: 10, source: 'x', pressurePct: 99 }));
    await expect(remote.slots('auto')).rejects.toThrow(/sandbox_provider=opensandbox runs them elsewhere: set a number/);
    expect(await remote.refusal()).toBeNull();
  });

  it('config: a number or auto, nothing else', () => {
    expect(ConfigSchema.parse({ queues: { rollout_concurrency: 'auto' } }).queues.rollout_concurrency).toBe('auto');
    expect(() => ConfigSchema.parse({ queues: { rollout_concurrency: 'many' } })).toThrow(/a whole number of at least 1, or auto/);
  });
});

describe('a sandbox-worker whose host runs out of memory mid-run', () => {
  let env: FleetEnv;
  let client: Redis;
  let connection: Redis;
  beforeAll(async () => {
    env = await makeFleetEnv({ rows: 4, judgeUrl: 'http://127.0.0.1:9/v1', overrides: ['++run_id=mem', '++sandbox_config.resources.memory_mib=1024', '++queues.memory_reserve_mib=512'] });
    client = createRedis(REDIS_URL, 'client');
    connection = createRedis(REDIS_URL, 'worker');
    const config = env.config();
    const bench = await loadPreparedBenchmark(config.data_dir, config.benchmark);
    await produceRun({ config, redis: client, logger: env.logger, tasks: bench.tasks, readImage: bench.readImage });
  });
  afterEach(() => undefined);
  afterAll(async () => {
    client?.disconnect();
    connection?.disconnect();
    await env?.cleanup();
  });

  it('hands the job back, attempt kept, holds until memory frees, says so once, then finishes the run', async () => {
    let free = 2000;
    const memory = async (): Promise<HostMemory> => ({ totalMib: 2048, availableMib: free, source: 'test host', pressurePct: null });
    const states: AdmissionState[] = [];
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(l) });
    const agent = createScriptedAgent({ '*': { answer: '@gold', delay_ms: 400 } });
    const config = env.config(['++queues.rollout_concurrency=auto']);
    const worker = await startSandboxWorker({ config, connection, logger, agent, onAdmission: (s) => states.push(s), readMemory: memory });
    try {
      expect(worker.admission()).toEqual({ slots: 1, held: null, holds: 0 }); // (2048 - 512) / 1024, rounded down
      const store = new RunStore(client, env.prefix);
      const judge = openQueue('judge', client, env.prefix);
      await waitFor('a first rollout done', async () => (await judge.getJobCounts('waiting', 'active', 'delayed')).waiting >= 1, 20_000, 50);
      free = 1200; // less than a sandbox plus the reserve
      await waitFor('the worker to hold', () => worker.admission().held !== null, 20_000, 50);
      expect(worker.admission().held).toMatch(/1,200 MiB of memory free in test host; a sandbox may use 1,024 MiB .* and 512 MiB stay reserved/);
      const rollouts = openQueue('rollout', client, env.prefix);
      await waitFor('nothing running', async () => (await rollouts.getActiveCount()) === 0, 20_000, 50);
      const before = (await judge.getJobCounts('waiting')).waiting;
      await new Promise((r) => setTimeout(r, 1500));
      expect((await judge.getJobCounts('waiting')).waiting).toBe(before); // held: no session started
      for (const job of await rollouts.getJobs(['wait', 'delayed', 'prioritized'])) expect(job.attemptsMade).toBe(0);
      free = 2000;
      await waitFor('every rollout to reach the judge', async () => (await judge.getJobCounts('waiting')).waiting === 4, 30_000, 100);
      expect(worker.admission()).toMatchObject({ held: null, holds: 1 });
      const warned = lines.filter((l) => l.includes('not taking rollouts'));
      expect(warned).toHaveLength(1);
      expect(lines.some((l) => l.includes('taking rollouts again'))).toBe(true);
      expect(states.some((s) => s.held !== null) && states.at(-1)!.held === null).toBe(true);
      expect(await store.countRows('mem')).toBe(0); // no row was made of a handed-back job
      await Promise.all([judge.close(), rollouts.close()]);
    } finally {
      await worker.close(0);
    }
  });
});
