/**
 * The box of `local` sandboxes against real bubblewrap, real cgroups and real tmpfs mounts, with
 * small limits, run as a hostile model would: memory over the limit, a fork storm, a disk fill of
 * /tmp, the workspace and /dev/shm, forbidden system calls, a CPU hog. Each must fail inside the
 * sandbox as an ordinary command failure, be counted in limitHits, and leave the host, a second
 * sandbox and nothing behind. Needs root (cgroups, mounts); skipped with the reason otherwise.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, rmdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { ConfigSchema } from '../../src/shared/config.ts';
import { opencodeBinaryPath, opencodeRoBinds } from '../../src/workers/sandbox/opencode/binary.ts';
import { describeLimitHit, unenforced } from '../../src/workers/sandbox/sandboxes/box-report.ts';
import { detectCgroupLayout } from '../../src/workers/sandbox/sandboxes/cgroup-layout.ts';
import { LocalBwrapProvider } from '../../src/workers/sandbox/sandboxes/local-bwrap.ts';
import { cgroupName } from '../../src/workers/sandbox/sandboxes/sandbox-cgroup.ts';
import { syscallNumbers } from '../../src/workers/sandbox/sandboxes/seccomp-filter.ts';
import type { BoxReport, Sandbox, SandboxResources } from '../../src/workers/sandbox/sandboxes/types.ts';

const ROOT = mkdtempSync(path.join(os.tmpdir(), 'vcfleet-box-test-'));
const SANDBOXES = path.join(ROOT, 'sandboxes');
const LIMITS: SandboxResources = { cpu: 1, memory_mib: 128, pids: 64, disk_mib: 32 };
const GATEWAY = { port: 18932 };

let provider: LocalBwrapProvider;
let report: BoxReport;
const created: Sandbox[] = [];

async function sandboxOf(p: LocalBwrapProvider): Promise<Sandbox> {
  const sb = await p.create({ label: 'box', gateway: GATEWAY });
  created.push(sb);
  return sb;
}

/** Skips on a host where the box cannot be enforced (not root, no writable cgroup, no seccomp bindings). */
function needsBox(ctx: TestContext): void {
  if (process.getuid?.() !== 0) ctx.skip('needs root: cgroups and tmpfs mounts');
  const missing = unenforced(report);
  if (missing.length > 0) ctx.skip(`this host cannot enforce: ${missing.join('; ')}`);
}

/** This test process's sandbox cgroup folders that still exist. */
async function leftoverCgroups(): Promise<string[]> {
  const layout = await detectCgroupLayout();
  const parents = new Set(Object.values(layout.places).map((p) => p.parent));
  const prefix = `vcfleet-${process.pid}-`;
  return [...parents].flatMap((p) => readdirSync(p).filter((n) => n.startsWith(prefix)).map((n) => path.join(p, n)));
}

async function cgroupFile(sb: Sandbox, controller: 'cpu' | 'memory' | 'pids', file: string): Promise<string> {
  const place = (await detectCgroupLayout()).places[controller]!;
  return readFileSync(path.join(place.parent, cgroupName(sb.id), file), 'utf8');
}

beforeAll(async () => {
  provider = new LocalBwrapProvider({ workdir: '/workspace', rootDir: SANDBOXES, resources: LIMITS, killGraceMs: 500, diskPollMs: 100 });
  report = await provider.probe();
});

afterEach(async () => {
  await Promise.all(created.splice(0).map((s) => s.destroy()));
  // Nothing of any sandbox is left on the host: no mount, no folder, no cgroup.
  expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(ROOT);
  expect(existsSync(SANDBOXES) ? readdirSync(SANDBOXES) : []).toEqual([]);
  expect(await leftoverCgroups()).toEqual([]);
});

afterAll(async () => {
  await provider.close();
  rmSync(ROOT, { recursive: true, force: true });
});

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

describe('the box of a local sandbox (real cgroups, tmpfs, seccomp)', () => {
  it('reports every limit as enforced on this host, naming how', async (ctx) => {
    if (process.getuid?.() !== 0) ctx.skip('needs root');
    expect(report.memory.detail).toMatch(/^cgroup v[12] .*vcfleet-\*: memory\./);
    expect(report.pids.detail).toMatch(/pids\.max=64/);
    expect(report.disk.detail).toMatch(/32 MiB tmpfs per sandbox/);
    expect(report.seccomp.detail).toMatch(/BPF instructions/);
    expect(unenforced(report)).toEqual([]);
  });

  it('memory: 3x the limit is OOM-killed inside one sandbox while a second sandbox and the host carry on', async (ctx) => {
    needsBox(ctx);
    const [hog, calm] = [await sandboxOf(provider), await sandboxOf(provider)];
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
    needsBox(ctx);
    const sb = await sandboxOf(provider);
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
    needsBox(ctx);
    const sb = await sandboxOf(provider);
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
    needsBox(ctx);
    const [filled, small] = [await sandboxOf(provider), await sandboxOf(provider)];
    const fill = 'head -c 40M /dev/zero > /tmp/f 2>/dev/null; sleep 0.5; rm /tmp/f; sleep 0.3';
    expect((await filled.exec(['sh', '-c', fill])).exitCode).toBe(0);
    expect((await small.exec(['sh', '-c', 'head -c 1M /dev/zero > /tmp/f; sleep 0.5; rm /tmp/f'])).exitCode).toBe(0);
    expect(await filled.limitHits()).toEqual({ disk: 1 });
    expect(await small.limitHits()).toEqual({});
  });

  it('cpu: a busy loop is throttled to its share', async (ctx) => {
    needsBox(ctx);
    const slow = new LocalBwrapProvider({ workdir: '/workspace', rootDir: SANDBOXES, resources: { ...LIMITS, cpu: 0.2 } });
    try {
      const sb = await sandboxOf(slow);
      const r = await sb.exec(['python3', '-c', 'import time\nt = time.time()\nwhile time.time() - t < 0.8: pass']);
      expect(r.exitCode).toBe(0);
      expect(Number(/nr_throttled (\d+)/.exec(await cgroupFile(sb, 'cpu', 'cpu.stat'))![1])).toBeGreaterThan(0);
    } finally {
      await Promise.all(created.splice(0).map((s) => s.destroy()));
      await slow.close();
    }
  });

  it('every exec of a sandbox runs inside its one cgroup, each started before it could fork', async (ctx) => {
    needsBox(ctx);
    const sb = await sandboxOf(provider);
    const marker = `sleep ${940000 + (process.pid % 1000)}5`;
    const ac = new AbortController();
    const runs = [1, 2].map(() => sb.exec(['sh', '-c', `${marker}`], { signal: ac.signal }));
    let members: number[] = [];
    for (let i = 0; i < 50 && members.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 50));
      members = readdirSync('/proc').filter((e) => /^\d+$/.test(e)).map(Number).filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').includes(marker);
        } catch {
          return false;
        }
      });
    }
    const inCgroup = (await cgroupFile(sb, 'pids', 'cgroup.procs')).split('\n').filter(Boolean).map(Number);
    expect(members.length).toBeGreaterThanOrEqual(2);
    for (const pid of members) expect(inCgroup).toContain(pid);
    expect(inCgroup).not.toContain(process.pid);
    ac.abort();
    await Promise.all(runs);
  });

  it('a command that cannot join its sandbox cgroup is not run: InfraError, and destroy still works', async (ctx) => {
    needsBox(ctx);
    const sb = await sandboxOf(provider);
    expect((await sb.exec(['true'])).exitCode).toBe(0);
    // Someone removed the (empty, between commands) pids cgroup of the sandbox.
    const place = (await detectCgroupLayout()).places.pids!;
    rmdirSync(path.join(place.parent, cgroupName(sb.id)));
    await expect(sb.exec(['sh', '-c', 'echo ran > /workspace/ran'])).rejects.toThrow(/could not join its cgroup: vcfleet-box-[0-9a-f]+: cannot join .*cgroup\.procs/);
    await expect(sb.getFile('/workspace/ran')).rejects.toThrow(/does not exist/);
  });

  it('forbidden system calls fail inside the box and succeed without it', async (ctx) => {
    needsBox(ctx);
    const nr = await syscallNumbers(['ptrace', 'pidfd_open', 'pidfd_getfd', 'io_uring_setup', 'unshare', 'clone3', 'personality', 'getpid']);
    const probe = `
import ctypes, errno, json, os, socket, sys, time
nr = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    r = libc.syscall(ctypes.c_long(nr[name]), *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
params = ctypes.create_string_buffer(120)
pidfd = libc.syscall(ctypes.c_long(nr["pidfd_open"]), ctypes.c_long(child), ctypes.c_long(0))
out = {
    "getpid": call("getpid"),
    "ptrace": call("ptrace", 16, child, 0, 0),
    "pidfd_getfd": call("pidfd_getfd", pidfd, 0, 0),
    "io_uring_setup": call("io_uring_setup", 4, ctypes.addressof(params)),
    "unshare": call("unshare", 0x400),
    "personality": call("personality", 0x0040000),
}
try:
    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()
    out["vsock"] = "ok"
except OSError as e:
    out["vsock"] = errno.errorcode[e.errno]
out["clone3"] = call("clone3", 0, 0)
print(json.dumps(out))
`;
    const boxed = await sandboxOf(provider);
    const r = await boxed.exec(['python3', '-c', probe, JSON.stringify(nr)]);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({
      getpid: 'ok', ptrace: 'EPERM', pidfd_getfd: 'EPERM', io_uring_setup: 'EPERM', unshare: 'EPERM', personality: 'EPERM', vsock: 'EPERM', clone3: 'ENOSYS',
    });
    // The same calls without the filter: they are refused by the filter, not by something else.
    const bare = new LocalBwrapProvider({ workdir: '/workspace', rootDir: SANDBOXES, box: false });
    try {
      const open = await sandboxOf(bare);
      const o = JSON.parse((await open.exec(['python3', '-c', probe, JSON.stringify(nr)])).stdout);
      expect(o).toMatchObject({ getpid: 'ok', ptrace: 'ok', pidfd_getfd: 'ok', io_uring_setup: 'ok', unshare: 'ok', personality: 'ok' });
    } finally {
      await Promise.all(created.splice(0).map((s) => s.destroy()));
      await bare.close();
    }
  });

  it('/proc hides the host boot line, keeps meminfo; /dev is read-only but /dev/shm is not; rlimits and thread variables are set', async (ctx) => {
    needsBox(ctx);
    const sb = await sandboxOf(provider);
    const limits = 'import resource as r; print(r.getrlimit(r.RLIMIT_FSIZE)[0], r.getrlimit(r.RLIMIT_NOFILE)[0], r.getrlimit(r.RLIMIT_CORE)[0])';
    const r = await sb.exec(['sh', '-c', `wc -c < /proc/cmdline; grep -c MemTotal /proc/meminfo; touch /dev/x 2>&1; touch /dev/shm/y && echo shm; echo $OMP_NUM_THREADS$OPENBLAS_NUM_THREADS; python3 -c '${limits}'`]);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toBe('0');
    expect(lines[1]).toBe('1');
    expect(lines[2]).toMatch(/Read-only file system/);
    expect(lines.slice(3)).toEqual(['shm', '11', `${LIMITS.disk_mib * 2 ** 20} 4096 0`]);
  });

  it('runs the real OpenCode binary inside the box (Bun under the seccomp filter)', async (ctx) => {
    needsBox(ctx);
    const config = ConfigSchema.parse({});
    const oc = new LocalBwrapProvider({ workdir: '/workspace', rootDir: SANDBOXES, resources: { ...LIMITS, memory_mib: 1024 }, extraRoBinds: opencodeRoBinds(config) });
    try {
      const sb = await sandboxOf(oc);
      const r = await sb.exec([opencodeBinaryPath(config), '--version'], { timeoutMs: 60_000 });
      expect(r).toMatchObject({ exitCode: 0, stdout: '1.17.11\n' });
    } finally {
      await Promise.all(created.splice(0).map((s) => s.destroy()));
      await oc.close();
    }
  });
});
