/**
 * The limits of `local` sandboxes against real bubblewrap, real cgroups and real tmpfs mounts, with
 * small limits, run as a hostile model would: memory over the limit, a fork storm, a disk fill of
 * /tmp, the workspace and /dev/shm, a CPU hog. Each must fail inside the sandbox as an ordinary
 * command failure, be counted in limitHits, and leave the host, a second sandbox and nothing behind.
 * Needs root (cgroups, mounts); skipped with the reason otherwise.
 */
import { readFileSync, readdirSync, rmdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { describeLimitHit } from '../../../src/sandboxes/box-report.ts';
import { detectCgroupLayout } from '../../../src/sandboxes/local/cgroup-layout.ts';
import { cgroupName } from '../../../src/sandboxes/local/sandbox-cgroup.ts';
import { BOX_LIMITS, boxTestEnv, cgroupFile, type BoxTestEnv } from '../../helpers/box.ts';

const LIMITS = BOX_LIMITS;
let env: BoxTestEnv;

beforeAll(async () => {
  env = await boxTestEnv();
});
afterEach(() => env.cleanUp());
afterAll(() => env.close());

const FORK_STORM = `
import errno, os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as e:
    print(n, errno.errorcode[e.errno])
`;

/** Fills each folder with 4 MiB files until a write fails; prints folder, MiB written, errno; then empties it. */
const FILL = `
import errno, os, sys
for d in sys.argv[1:]:
    n, files = 0, []
    try:
        while True:
            files.append(os.path.join(d, "fill-%d" % len(files)))
            with open(files[-1], "wb", buffering=0) as f:
                for _ in range(4):
                    n += f.write(b"x" * 2**20)
    except OSError as e:
        print(d, n // 2**20, errno.errorcode[e.errno])
    for p in files:
        os.remove(p)
`;
import { waitFor } from '../../helpers/wait.ts';

describe('the limits of a local sandbox (real cgroups and tmpfs)', () => {
  it('memory: 3x the limit is OOM-killed inside one sandbox while a second sandbox and the host carry on', async (ctx) => {
    env.needsBox(ctx);
    const [hog, calm] = [await env.sandboxOf(), await env.sandboxOf()];
    const [h, c] = await Promise.all([
      hog.exec(['python3', '-c', 'x = b"x" * (384 * 2**20); print("allocated", len(x))']),
      calm.exec(['python3', '-c', 'import numpy; a = numpy.ones(2**20); print(a.sum())']),
    ]);
    // The OOM killer's SIGKILL is an ordinary result, not an exception.
    expect(h).toMatchObject({ exitCode: null, signal: 'SIGKILL', stdout: '', timedOut: false, aborted: false });
    expect(c).toMatchObject({ exitCode: 0, stdout: '1048576.0\n' });
    const hits = await hog.limitHits();
    expect(hits.memory).toBeGreaterThan(0);
    expect(describeLimitHit(hits, LIMITS)).toBe('the sandbox hit its 128 MiB memory limit');
    expect(await calm.limitHits()).toEqual({});
    // The host process itself may still allocate more than the sandbox's limit.
    expect(Buffer.alloc(256 * 2 ** 20, 1).length).toBe(256 * 2 ** 20);
  });

  it('processes: a fork storm stops at pids with EAGAIN, and is counted', async (ctx) => {
    env.needsBox(ctx);
    const sb = await env.sandboxOf();
    const r = await sb.exec(['python3', '-c', FORK_STORM], { timeoutMs: 60_000 });
    const [forks, code] = r.stdout.trim().split(' ');
    expect(code).toBe('EAGAIN');
    expect(Number(forks)).toBeGreaterThan(10);
    expect(Number(forks)).toBeLessThan(LIMITS.pids);
    const hits = await sb.limitHits();
    expect(hits.pids).toBeGreaterThan(0);
    expect(describeLimitHit({ pids: hits.pids }, LIMITS)).toBe('the sandbox hit its 64-process limit');
    // The storm is gone with its command: the sandbox runs the next one.
    expect((await sb.exec(['true'])).exitCode).toBe(0);
  });

  it('disk: /tmp, the workspace and /dev/shm share disk_mib and each fill ends in ENOSPC', async (ctx) => {
    env.needsBox(ctx);
    const sb = await env.sandboxOf();
    const r = await sb.exec(['python3', '-c', FILL, '/tmp', '/workspace', '/dev/shm']);
    expect(r.exitCode).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => l.split(' '));
    expect(lines.map(([p, , code]) => `${p} ${code}`)).toEqual(['/tmp ENOSPC', '/workspace ENOSPC', '/dev/shm ENOSPC']);
    for (const [, mib] of lines) expect(Number(mib)).toBeGreaterThan(LIMITS.disk_mib - 4);
    for (const [, mib] of lines) expect(Number(mib)).toBeLessThanOrEqual(LIMITS.disk_mib);
    // One file is also capped at disk_mib (RLIMIT_FSIZE, which holds even where no tmpfs can be mounted).
    const big = await sb.exec(['python3', '-c', 'import errno\ntry:\n open("/tmp/big", "wb").write(b"x" * 40 * 2**20)\nexcept OSError as e:\n print(errno.errorcode[e.errno])']);
    expect(big.stdout).toBe('EFBIG\n');
    const hits = await sb.limitHits();
    expect(hits).toEqual({ disk: 1 });
    expect(describeLimitHit(hits, LIMITS)).toBe('the sandbox hit its 32 MiB disk limit');
  });

  it('disk: a fill that is deleted again before the command ends is still seen; a small write is not a hit', async (ctx) => {
    env.needsBox(ctx);
    const [filled, small] = [await env.sandboxOf(), await env.sandboxOf()];
    const fill = 'head -c 40M /dev/zero > /tmp/f 2>/dev/null; sleep 0.5; rm /tmp/f; sleep 0.3';
    expect((await filled.exec(['sh', '-c', fill])).exitCode).toBe(0);
    expect((await small.exec(['sh', '-c', 'head -c 1M /dev/zero > /tmp/f; sleep 0.5; rm /tmp/f'])).exitCode).toBe(0);
    expect(await filled.limitHits()).toEqual({ disk: 1 });
    expect(await small.limitHits()).toEqual({});
  });

  it('cpu: a busy loop is throttled to its share', async (ctx) => {
    env.needsBox(ctx);
    const sb = await env.sandboxOf(env.providerWith({ resources: { ...LIMITS, cpu: 0.2 } }));
    const r = await sb.exec(['python3', '-c', 'import time\nt = time.time()\nwhile time.time() - t < 0.8: pass']);
    expect(r.exitCode).toBe(0);
    expect(Number(/nr_throttled (\d+)/.exec(await cgroupFile(sb, 'cpu', 'cpu.stat'))![1])).toBeGreaterThan(0);
  });

  it('every exec of a sandbox runs inside its one cgroup, each started before it could fork', async (ctx) => {
    env.needsBox(ctx);
    const sb = await env.sandboxOf();
    const marker = `sleep ${940000 + (process.pid % 1000)}5`;
    const ac = new AbortController();
    const runs = [1, 2].map(() => sb.exec(['sh', '-c', `${marker}`], { signal: ac.signal }));
    const running = () => readdirSync('/proc').filter((e) => /^\d+$/.test(e)).map(Number).filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').includes(marker);
      } catch {
        return false;
      }
    });
    const members = await waitFor('both commands to run', () => { const m = running(); return m.length >= 2 && m; }, 10_000, 50);
    const inCgroup = (await cgroupFile(sb, 'pids', 'cgroup.procs')).split('\n').filter(Boolean).map(Number);
    expect(members.length).toBeGreaterThanOrEqual(2);
    for (const pid of members) expect(inCgroup).toContain(pid);
    expect(inCgroup).not.toContain(process.pid);
    ac.abort();
    await Promise.all(runs);
  });

  it('a command that cannot join its sandbox cgroup is not run: InfraError, and destroy still works', async (ctx) => {
    env.needsBox(ctx);
    const sb = await env.sandboxOf();
    expect((await sb.exec(['true'])).exitCode).toBe(0);
    // Someone removed the (empty, between commands) pids cgroup of the sandbox.
    const place = (await detectCgroupLayout()).places.pids!;
    // The last command's processes may still be leaving it (EBUSY) on a loaded host.
    const dir = path.join(place.parent, cgroupName(sb.id));
    await waitFor('the pids cgroup to empty and go', () => {
      try {
        rmdirSync(dir);
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EBUSY') return false;
        throw err;
      }
    }, 10_000, 50);
    await expect(sb.exec(['sh', '-c', 'echo ran > /workspace/ran'])).rejects.toThrow(/could not be set up: cannot join .*cgroup\.procs/);
    await expect(sb.getFile('/workspace/ran')).rejects.toThrow(/does not exist/);
  });

});
