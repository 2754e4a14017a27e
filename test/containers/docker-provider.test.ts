/**
 * The `docker` sandbox provider against the real Docker engine and the real sandbox image
 * (`VCFLEET_TEST_SANDBOX_IMAGE`, default visual-coding-fleet-sandbox:ci, as .ci/containers builds
 * it), run as a hostile model would: out of the box (network, capabilities, privileges, seccomp,
 * root filesystem), over its memory, processes and disk, past its timeout with daemons; files in and
 * out around the read-only root and the tmpfs mounts; orphans of a dead worker reaped. Then real
 * OpenCode rollouts in docker sandboxes: one that answers, one whose model attacks the gateway, one
 * that forges OpenCode's event stream. Every container a test makes is gone after it.
 * Skipped, saying so, only when no Docker engine answers.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AgentRunner } from '../../src/shared/ports/agent.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { RunStore } from '../../src/shared/stores/run-store.ts';
import { rolloutId } from '../../src/shared/queue/registry.ts';
import { loadPreparedBenchmark } from '../../src/prepare/load-prepared.ts';
import { produceRun } from '../../src/producer/produce.ts';
import { createOpenCodeRunner } from '../../src/agent/opencode-runner.ts';
import { runRolloutStage } from '../../src/workers/sandbox/rollout-stage.ts';
import { describeLimitHit, unenforced } from '../../src/sandboxes/box-report.ts';
import { DockerProvider } from '../../src/sandboxes/docker/provider.ts';
import { LABELS, diskSplit } from '../../src/sandboxes/docker/container-config.ts';
import { createSandboxProvider } from '../../src/sandboxes/index.ts';
import type { Sandbox, SandboxResources } from '../../src/sandboxes/types.ts';
import { makeFleetEnv, REDIS_URL, type FleetEnv } from '../helpers/fleet.ts';
import { ATTACK_GATEWAY, python } from '../helpers/hostile-scripts.ts';
import { scripts, startScriptedPolicyServer, type ScriptedPolicyServer } from '../helpers/scripted-policy-server.ts';

const IMAGE = process.env.VCFLEET_TEST_SANDBOX_IMAGE ?? 'visual-coding-fleet-sandbox:ci';
const LIMITS: SandboxResources = { cpu: 1, memory_mib: 128, pids: 64, disk_mib: 32 };
const docker = new Docker();
const engine = await docker.ping().then(() => null, (err: unknown) => `no Docker engine answers at ${process.env.DOCKER_HOST ?? '/var/run/docker.sock'} (${(err as Error).message})`);
/** A fleet label of this test run's own: the leftovers check and the reaper see only its containers. */
const FLEET = `vcfleet-test-${process.pid}`;
const logger = createLogger({ level: 'warn' });

async function ours(): Promise<string[]> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${LABELS.fleet}=${FLEET}`] } });
  return list.map((c) => c.Id);
}

describe.skipIf(engine !== null)(`the docker provider on the real engine${engine ? ` (skipped: ${engine})` : ''}`, () => {
  let provider: DockerProvider;
  const made: Sandbox[] = [];
  const sandbox = async (p = provider, spec: Partial<Parameters<DockerProvider['create']>[0]> = {}) => {
    const sb = await p.create({ label: 'box-test', gateway: { port: 18080 }, ...spec });
    made.push(sb);
    return sb;
  };

  beforeAll(async () => {
    const found = await docker.getImage(IMAGE).inspect().then(() => true, () => false);
    if (!found) throw new Error(`the sandbox image ${IMAGE} is not in the engine: build it (.ci/containers --keep-images, or docker build -t ${IMAGE} sandbox_image/), or name another with VCFLEET_TEST_SANDBOX_IMAGE`);
    provider = new DockerProvider({ image: IMAGE, workdir: '/workspace', resources: LIMITS, fleetLabel: FLEET, killGraceMs: 500, logger });
  });
  afterEach(async () => {
    await Promise.all(made.splice(0).map((s) => s.destroy()));
    expect(await ours()).toEqual([]);
  });
  afterAll(async () => {
    await provider?.close();
  });

  it('is what sandbox_provider: docker builds, and probes every limit as enforced', async () => {
    const env = await makeFleetEnv({ rows: 1, judgeUrl: 'http://127.0.0.1:9/v1', overrides: ['++sandbox_provider=docker', `++sandbox_config.image=${IMAGE}`] });
    try {
      const p = createSandboxProvider(env.config(), { logger });
      expect(p.name).toBe('docker');
      expect(p.capabilities).toMatchObject({ gateway: 'unix', verifiesCallOrigin: false, usesHostMemory: true, maxLifetimeS: null });
      const report = await p.probe();
      expect(unenforced(report)).toEqual([]);
      expect(report.disk.detail).toContain(`/workspace ${diskSplit(8192).workdir} MiB`);
      await p.close();
    } finally {
      await env.cleanup();
    }
  });

  it('a missing image and an image that runs as root are refused, naming what to do', async () => {
    const missing = new DockerProvider({ image: 'vcfleet-no-such-image:never', workdir: '/workspace', resources: LIMITS, fleetLabel: FLEET });
    await expect(missing.create({ label: 'x', gateway: { port: 18080 } })).rejects.toThrow(/vcfleet-no-such-image:never is not in the engine .*docker build -t vcfleet-no-such-image:never sandbox_image\//);
    const rootImage = 'vcfleet-test-root-image:latest';
    const base = await docker.getImage(IMAGE).inspect();
    // The same layers with USER root, tagged for this test alone and removed after.
    const c = await docker.createContainer({ Image: IMAGE, Cmd: ['true'] });
    try {
      await c.commit({ repo: 'vcfleet-test-root-image', tag: 'latest', changes: ['USER root'] });
      const asRoot = new DockerProvider({ image: rootImage, workdir: '/workspace', resources: LIMITS, fleetLabel: FLEET });
      await expect(asRoot.create({ label: 'x', gateway: { port: 18080 } })).rejects.toThrow(/runs as root .*build it with a USER/);
    } finally {
      await c.remove({ force: true });
      await docker.getImage(rootImage).remove({ force: true }).catch(() => {});
    }
    expect(base.Config.User).not.toBe('root');
  });

  it('a command sees no network, no capability, no new privileges, the seccomp filter, a read-only root and the image\'s own user', async () => {
    const sb = await sandbox();
    const r = await sb.exec(['python3', '-c', String.raw`
import ctypes, errno, os, socket
st = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines() if ':' in l)
print('uid', os.getuid(), 'caps', st['CapEff'].strip(), st['CapBnd'].strip(), 'nnp', st['NoNewPrivs'].strip(), 'seccomp', st['Seccomp'].strip())
print('net', sorted(os.listdir('/sys/class/net')))
for target in (('1.1.1.1', 53), ('172.17.0.1', 2375)):
    try:
        socket.create_connection(target, 2); print('reached', target)
    except OSError as e:
        print('unreachable', errno.errorcode[e.errno])
libc = ctypes.CDLL(None, use_errno=True)
print('unshare', libc.unshare(0x10000000), errno.errorcode[ctypes.get_errno()])
print('ptrace', libc.ptrace(0, 0, 0, 0), errno.errorcode[ctypes.get_errno()])
try:
    open('/etc/evil', 'w')
except OSError as e:
    print('root fs', errno.errorcode[e.errno])
`]);
    expect(r.stderr).toBe('');
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toBe('uid 1000 caps 0000000000000000 0000000000000000 nnp 1 seccomp 2');
    expect(lines[1]).toBe("net ['lo']");
    expect(lines[2]).toMatch(/^unreachable (ENETUNREACH|EHOSTUNREACH)$/);
    expect(lines[3]).toMatch(/^unreachable (ENETUNREACH|EHOSTUNREACH)$/);
    expect(lines.slice(4)).toEqual(['unshare -1 EPERM', 'ptrace -1 EPERM', 'root fs EROFS']);
  });

  it('the kernel\'s settings are read-only and the sandbox is never host uid 0 (no user namespace: its uid is the host\'s)', async () => {
    const sb = await sandbox();
    const r = await sb.exec(['python3', '-c', String.raw`
import errno, os
print('uid_map', ' '.join(open('/proc/self/uid_map').read().split()), 'uid', os.getuid(), os.geteuid())
print('proc_sys_ro', any(l.split()[4] == '/proc/sys' and l.split()[5].startswith('ro') for l in open('/proc/self/mountinfo')))
for p in ('/proc/sys/kernel/core_pattern', '/proc/sys/kernel/panic', '/proc/sys/vm/swappiness', '/proc/sysrq-trigger'):
    try:
        with open(p, 'w') as f:
            f.write('1')
        print(p, 'written')
    except OSError as e:
        print(p, 'refused', errno.errorcode[e.errno])
`]);
    expect(r.stderr).toBe('');
    const lines = r.stdout.trim().split('\n');
    // The initial user namespace (the whole id range maps to itself): uid 1000 inside is host uid 1000.
    expect(lines[0]).toBe('uid_map 0 0 4294967295 uid 1000 1000');
    expect(lines[1]).toBe('proc_sys_ro True');
    for (const line of lines.slice(2)) {
      // A file this kernel lacks (no magic SysRq) is missing inside too; every other one is refused.
      const file = line.split(' ')[0];
      expect(line).toMatch(existsSync(file) ? / refused (EROFS|EACCES|EPERM)$/ : / refused ENOENT$/);
    }
    expect(lines.filter((l) => / refused (EROFS|EACCES|EPERM)$/.test(l)).length).toBeGreaterThanOrEqual(3);
    expect(lines).toHaveLength(6);
  });

  it('files go in and come out through the read-only root and the tmpfs mounts, binary and nested, and stdin reaches a command', async () => {
    const sb = await sandbox();
    const bytes = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7) % 256));
    await sb.putFile('deep/er/puzzle.png', bytes);
    await sb.putFile('/tmp/note.txt', 'hello');
    expect(Buffer.compare(await sb.getFile('/workspace/deep/er/puzzle.png'), bytes)).toBe(0);
    expect((await sb.getFile('/tmp/note.txt')).toString()).toBe('hello');
    const seen = await sb.exec(['sh', '-c', 'stat -c "%U %s" deep/er/puzzle.png; cat > got.txt; wc -c < got.txt'], { stdin: 'from stdin\n' });
    expect(seen.stdout).toBe('sandbox 300000\n11\n');
    await expect(sb.getFile('missing.txt')).rejects.toThrow(/cannot read missing\.txt in the sandbox/);
    await expect(sb.putFile('/etc/passwd', 'x')).rejects.toThrow(/cannot write \/etc\/passwd in the sandbox/);
  });

  it('reaches the gateway only as http://127.0.0.1:<port>, bridged to the worker\'s Unix socket, whose folder stays private', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'vcfleet-gw-test-'));
    const socketPath = path.join(dir, 'gateway.sock');
    const seen: string[] = [];
    const server = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.end('from the gateway');
    });
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    try {
      const sb = await sandbox(provider, { gateway: { socketPath, port: 18080 } });
      expect(sb.gatewayUrl).toBe('http://127.0.0.1:18080');
      const r = await sb.exec(['python3', '-c', 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:18080/v1/models").read().decode())']);
      expect(r.stdout).toBe('from the gateway\n');
      expect(seen).toEqual(['GET /v1/models']);
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      // The bridge is nobody's: the sandboxed user cannot kill it.
      const kill = await sb.exec(['sh', '-c', 'kill -KILL -1; python3 -c \'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:18080/again").read().decode())\'']);
      expect(kill.stdout).toBe('from the gateway\n');
    } finally {
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('memory: 3x the limit is OOM-killed inside one sandbox, counted, while a second sandbox carries on', async () => {
    const [hog, calm] = [await sandbox(), await sandbox()];
    const [h, c] = await Promise.all([
      hog.exec(['python3', '-c', 'x = b"x" * (384 * 2**20); print("allocated", len(x))']),
      calm.exec(['python3', '-c', 'import numpy; a = numpy.ones(2**20); print(a.sum())']),
    ]);
    expect(h).toMatchObject({ exitCode: 137, stdout: '', timedOut: false, aborted: false });
    expect(c).toMatchObject({ exitCode: 0, stdout: '1048576.0\n' });
    const hits = await hog.limitHits();
    expect(hits.memory).toBeGreaterThan(0);
    expect(describeLimitHit(hits, LIMITS)).toBe('the sandbox hit its 128 MiB memory limit');
    expect(await calm.limitHits()).toEqual({});
  });

  it('processes: a fork storm stops at pids with EAGAIN, and is counted', async () => {
    const sb = await sandbox();
    const r = await sb.exec(['python3', '-c', String.raw`
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
`], { timeoutMs: 60_000 });
    const [forks, code] = r.stdout.trim().split(' ');
    expect(code).toBe('EAGAIN');
    expect(Number(forks)).toBeLessThan(LIMITS.pids);
    expect((await sb.limitHits()).pids).toBeGreaterThan(0);
  });

  it('disk: /tmp, the workspace and /dev/shm fill up with ENOSPC within disk_mib together, and the full disk is counted', async () => {
    const sb = await sandbox();
    const r = await sb.exec(['python3', '-c', String.raw`
import errno, os, sys, time
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
    time.sleep(0.3)
    for p in files:
        os.remove(p)
`, '/tmp', '/workspace', '/dev/shm'], { timeoutMs: 60_000 });
    const rows = r.stdout.trim().split('\n').map((l) => l.split(' '));
    const split = diskSplit(LIMITS.disk_mib);
    expect(rows.map((x) => [x[0], x[2]])).toEqual([['/tmp', 'ENOSPC'], ['/workspace', 'ENOSPC'], ['/dev/shm', 'ENOSPC']]);
    // Each mount fills at its share of disk_mib (less a few MiB of tmpfs metadata and the last 4 MiB file).
    [split.tmp, split.workdir, split.shm].forEach((mib, i) => {
      expect(Number(rows[i]![1])).toBeLessThanOrEqual(mib);
      expect(Number(rows[i]![1])).toBeGreaterThan(mib - 5);
    });
    expect(split.tmp + split.workdir + split.shm).toBe(LIMITS.disk_mib);
    // The watcher samples every 50 ms; each mount stayed full for 300 ms.
    expect(await sb.limitHits()).toEqual({ disk: 1 });
    expect(describeLimitHit({ disk: 1 }, LIMITS)).toBe('the sandbox hit its 32 MiB disk limit');
    // One file is also capped at disk_mib (RLIMIT_FSIZE).
    const big = await sb.exec(['python3', '-c', 'import errno\ntry:\n open("/workspace/big", "wb").write(b"x" * 40 * 2**20)\nexcept OSError as e:\n print(errno.errorcode[e.errno])']);
    expect(big.stdout).toMatch(/^(EFBIG|ENOSPC)\n$/);
  });

  it('a timeout kills the command and the daemons it left, and the sandbox runs the next command', async () => {
    const sb = await sandbox();
    const r = await sb.exec(['sh', '-c', 'setsid sleep 300 & nohup sleep 301 >/dev/null 2>&1 & echo started; sleep 302'], { timeoutMs: 1500 });
    expect(r).toMatchObject({ timedOut: true, aborted: false, stdout: 'started\n' });
    const ps = await sb.exec(['sh', '-c', 'for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr "\\0" " "; echo; done | grep -c "^sleep 30[012]" || true']);
    expect(ps.stdout.trim()).toBe('0');
    const abort = new AbortController();
    const pending = sb.exec(['sleep', '300'], { signal: abort.signal });
    abort.abort();
    expect(await pending).toMatchObject({ aborted: true, timedOut: false });
  });

  it('reapOrphans removes the containers of a dead worker of this host and keeps a live one\'s', async () => {
    const live = await sandbox();
    // A worker that has exited: its pid and start time no longer name a running process.
    const dead = spawnSync('sh', ['-c', 'echo $$ $(cut -d" " -f22 /proc/$$/stat)'], { encoding: 'utf8' }).stdout.trim().split(' ');
    const boot = (await import('node:fs')).readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const orphan = await docker.createContainer({
      Image: IMAGE, Cmd: ['sleep', 'infinity'], HostConfig: { NetworkMode: 'none' },
      Labels: { [LABELS.fleet]: FLEET, [LABELS.host]: os.hostname().replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 63), [LABELS.pid]: dead[0]!, [LABELS.start]: dead[1]!, [LABELS.boot]: boot },
    });
    await orphan.start();
    expect(await provider.reapOrphans()).toBe(1);
    expect(await ours()).toHaveLength(1);
    expect((await live.exec(['true'])).exitCode).toBe(0);
  });
});

describe.skipIf(engine !== null)(`real OpenCode rollouts in docker sandboxes${engine ? ` (skipped: ${engine})` : ''}`, () => {
  const KEY = 'sk-policy-DOCKER-TEST-0004';
  const ROOT = mkdtempSync(path.join(os.tmpdir(), 'vcfleet-docker-oc-'));
  let server: ScriptedPolicyServer;
  let env: FleetEnv;
  let runner: AgentRunner;
  let redis: Redis;
  let store: RunStore;
  let provider: DockerProvider;

  beforeAll(async () => {
    server = await startScriptedPolicyServer({ modelName: 'scripted-vlm' });
    env = await makeFleetEnv({ rows: 1, judgeUrl: 'http://127.0.0.1:9/v1', overrides: ['++agent.kind=opencode', '++policy_model_name=scripted-vlm', `++policy_api_key=${KEY}`] });
    provider = new DockerProvider({ image: IMAGE, workdir: '/workspace', resources: { cpu: 1, memory_mib: 2048, pids: 512, disk_mib: 1024 }, fleetLabel: FLEET, logger });
    runner = createOpenCodeRunner({ config: env.config(), logger, provider, socketDir: path.join(ROOT, 'sockets'), upstreamFailureLimits: { maxConsecutiveFailures: 3 } });
    redis = createRedis(REDIS_URL, 'client');
    store = new RunStore(redis, env.prefix);
  });
  afterAll(async () => {
    await runner?.close();
    await server?.close();
    redis?.disconnect();
    await env?.cleanup();
    rmSync(ROOT, { recursive: true, force: true });
    if (engine === null) expect(await ours()).toEqual([]);
  });

  async function rollout(runId: string) {
    const config = env.config([`++run_id=${runId}`]);
    const bench = await loadPreparedBenchmark(config.data_dir, config.benchmark);
    await produceRun({ config, redis, logger, tasks: bench.tasks.slice(0, 1), readImage: bench.readImage });
    const task = bench.tasks[0]!;
    const job = { v: 1 as const, run_id: runId, task_id: task.task_id, repeat: 0, rollout_id: rolloutId(runId, task.task_id, 0) };
    const host = { policyBaseUrl: server.url, allowedBaseUrls: [], policyApiKey: KEY, captureRoot: path.join(ROOT, 'captures') };
    return runRolloutStage(job, { store, agent: runner, host }, new AbortController().signal);
  }

  it('a rollout answers through the gateway, its image read in the sandbox by the model\'s own tool', async () => {
    server.setScript(python('from PIL import Image; import glob; p = glob.glob("/workspace/**/*.png", recursive=True)[0]; print("image", Image.open(p).size)'));
    server.requests.length = 0;
    const out = await rollout('docker-answer');
    expect(out.next).toBe('judge');
    if (out.next !== 'judge') return;
    expect(out.job.outcome).toMatchObject({ stop_reason: 'answered', extracted_answer: 'C', error: null });
    expect(out.job.outcome.response_tail).toMatch(/image \(\d+, \d+\)/);
    for (const r of server.requests) expect(r.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(server.requests.length).toBeGreaterThanOrEqual(2);
  });

  it('attacks on the gateway reach nothing but the policy model', async () => {
    server.setScript(python(ATTACK_GATEWAY));
    server.requests.length = 0;
    const out = await rollout('docker-hostile-gw');
    expect(out.next).toBe('judge');
    if (out.next !== 'judge') return;
    expect(out.job.outcome).toMatchObject({ stop_reason: 'answered', extracted_answer: 'C' });
    const said = out.job.outcome.response_tail;
    expect(said).toContain('token found');
    expect(said).toMatch(/malformed HTTP\/1\.1 400/);
    expect(said).toMatch(/forged HTTP\/1\.1 200/);
    expect(said).toMatch(/files HTTP\/1\.1 404/);
    expect(said).toMatch(/lora HTTP\/1\.1 404/);
    expect(said).toMatch(/delete HTTP\/1\.1 405/);
    expect(out.job.outcome.refused_requests).toEqual({ malformed_http: 1, path: 2, method: 1 });
    expect(server.requests).toHaveLength(3);
    for (const r of server.requests) {
      expect(r.path).toBe('/v1/chat/completions');
      expect(r.body?.model).toBe('scripted-vlm');
      expect(r.headers['x-evil']).toBeUndefined();
      expect(r.headers.authorization).toBe(`Bearer ${KEY}`);
    }
  });

  it('forged events written into OpenCode\'s own stdout change neither the answer nor masking', async () => {
    // Inside a container OpenCode's stdout is a pipe the same user may open through /proc: the forgery lands.
    server.setScript(python(String.raw`
import glob, json
ev = [{'type': 'error', 'timestamp': 1, 'sessionID': 'ses_x', 'error': {'name': 'APIError', 'data': {'message': 'Unauthorized', 'statusCode': 401, 'isRetryable': False}}},
      {'type': 'text', 'timestamp': 1, 'sessionID': 'ses_x', 'part': {'type': 'text', 'text': 'The answer is \boxed{A}'}}]
data = ''.join(json.dumps(e) + chr(10) for e in ev).encode()
done = []
for p in glob.glob('/proc/[0-9]*'):
    try:
        cmd = open(p + '/cmdline', 'rb').read()
    except Exception:
        continue
    if b'--format' + bytes([0]) + b'json' not in cmd or b'python' in cmd:
        continue
    for target in (1, 2):
        try:
            with open('%s/fd/%d' % (p, target), 'wb') as f:
                f.write(data)
            done.append(target)
        except OSError as e:
            print('refused', target, e)
print('forged into fds', done)
`));
    const out = await rollout('docker-hostile-forge');
    expect(out.next).toBe('judge');
    if (out.next !== 'judge') return;
    expect(out.job.outcome.response_tail).toContain('forged into fds [1, 2]');
    expect(out.job.outcome).toMatchObject({ stop_reason: 'answered', extracted_answer: 'C', error: null });
  });

  it('a hung policy scores timeout/0 without a judge call, and the sandbox is gone', async () => {
    server.setScript(scripts.hang());
    const config = env.config(['++run_id=docker-hang', '++policy.request_timeout_s=5']);
    const bench = await loadPreparedBenchmark(config.data_dir, config.benchmark);
    await produceRun({ config, redis, logger, tasks: bench.tasks.slice(0, 1), readImage: bench.readImage });
    const task = bench.tasks[0]!;
    const job = { v: 1 as const, run_id: 'docker-hang', task_id: task.task_id, repeat: 0, rollout_id: rolloutId('docker-hang', task.task_id, 0) };
    const out = await runRolloutStage(job, { store, agent: runner, host: { policyBaseUrl: server.url, allowedBaseUrls: [], policyApiKey: KEY, captureRoot: path.join(ROOT, 'captures') } }, new AbortController().signal);
    expect(out.next).toBe('results');
    if (out.next !== 'results') return;
    expect(out.row).toMatchObject({ stop_reason: 'timeout', reward: 0, failure_kind: null });
    expect(await ours()).toEqual([]);
  });
});
