/**
 * The kernel surface of a boxed `local` sandbox against real bubblewrap: the seccomp filter refuses
 * what a hostile model could use against the host or other sandboxes (checked against the same
 * calls without the box), `/proc` hides the host's boot line and kernel internals, `/dev` cannot
 * be written, rlimits and thread variables are set, and the real OpenCode binary (Bun) still runs
 * under the filter. Needs root for the whole box; skipped with the reason otherwise.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../../src/shared/config/load.ts';
import { opencodeBinaryPath, opencodeRoBinds } from '../../../src/sandboxes/local/opencode-binary.ts';
import { unenforced } from '../../../src/sandboxes/box-report.ts';
import { syscallNumbers } from '../../../src/sandboxes/box/seccomp-filter.ts';
import { BOX_LIMITS, boxTestEnv, type BoxTestEnv } from '../../helpers/box.ts';

let env: BoxTestEnv;

beforeAll(async () => {
  env = await boxTestEnv();
});
afterEach(() => env.cleanUp());
afterAll(() => env.close());

describe('the kernel surface of a boxed local sandbox', () => {
  it('reports every limit as enforced on this host, naming how', async (ctx) => {
    if (process.getuid?.() !== 0) ctx.skip('needs root');
    expect(env.report.memory.detail).toMatch(/^cgroup v[12] .*vcfleet-\*: memory\./);
    expect(env.report.pids.detail).toMatch(/pids\.max=64/);
    expect(env.report.disk.detail).toMatch(/32 MiB tmpfs per sandbox/);
    expect(env.report.seccomp.detail).toMatch(/BPF instructions/);
    expect(unenforced(env.report)).toEqual([]);
  });

  it('forbidden system calls fail inside the box and succeed without it', async (ctx) => {
    env.needsBox(ctx);
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
    const boxed = await env.sandboxOf();
    const r = await boxed.exec(['python3', '-c', probe, JSON.stringify(nr)]);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({
      getpid: 'ok', ptrace: 'EPERM', pidfd_getfd: 'EPERM', io_uring_setup: 'EPERM', unshare: 'EPERM', personality: 'EPERM', vsock: 'EPERM', clone3: 'ENOSYS',
    });
    // The same calls without the filter: they are refused by the filter, not by something else.
    const open = await env.sandboxOf(env.providerWith({ box: false }));
    const o = JSON.parse((await open.exec(['python3', '-c', probe, JSON.stringify(nr)])).stdout);
    expect(o).toMatchObject({ getpid: 'ok', ptrace: 'ok', pidfd_getfd: 'ok', io_uring_setup: 'ok', unshare: 'ok', personality: 'ok' });
  });

  it('/proc hides the host boot line, keeps meminfo; /dev is read-only but /dev/shm is not; rlimits and thread variables are set', async (ctx) => {
    env.needsBox(ctx);
    const sb = await env.sandboxOf();
    const limits = 'import resource as r; print(r.getrlimit(r.RLIMIT_FSIZE)[0], r.getrlimit(r.RLIMIT_NOFILE)[0], r.getrlimit(r.RLIMIT_CORE)[0])';
    const r = await sb.exec(['sh', '-c', `wc -c < /proc/cmdline; grep -c MemTotal /proc/meminfo; touch /dev/x 2>&1; touch /dev/shm/y && echo shm; echo $OMP_NUM_THREADS$OPENBLAS_NUM_THREADS; python3 -c '${limits}'`]);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toBe('0');
    expect(lines[1]).toBe('1');
    expect(lines[2]).toMatch(/Read-only file system/);
    expect(lines.slice(3)).toEqual(['shm', '11', `${BOX_LIMITS.disk_mib * 2 ** 20} 4096 0`]);
  });

  it('runs the real OpenCode binary inside the box (Bun under the seccomp filter)', async (ctx) => {
    env.needsBox(ctx);
    const config = ConfigSchema.parse({});
    const oc = env.providerWith({ resources: { ...BOX_LIMITS, memory_mib: 1024 }, extraRoBinds: opencodeRoBinds(config) });
    const r = await (await env.sandboxOf(oc)).exec([opencodeBinaryPath(config), '--version'], { timeoutMs: 60_000 });
    expect(r).toMatchObject({ exitCode: 0, stdout: '1.17.11\n' });
  });
});
