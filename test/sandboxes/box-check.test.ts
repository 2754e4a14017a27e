/**
 * What a worker does with the box report at start: a `local` provider whose cgroup root is not
 * writable (a fake cgroup v1 tree on a read-only mount) reports memory, pids and cpu as not
 * enforced with the reason; the sandbox-worker (createAgentRunner) then refuses to start with a
 * ConfigError that says how to grant them, unless `sandbox_config.enforce_resources` is false, when
 * it starts and logs a loud warning. Also: OpenSandbox's report, and the sentence for a limit hit.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/shared/config/load.ts';
import { ConfigError } from '../../src/shared/errors.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createAgentRunner } from '../../src/agent/index.ts';
import { describeLimitHit, unenforced } from '../../src/sandboxes/box-report.ts';
import type { CgroupPaths } from '../../src/sandboxes/host-cgroups.ts';
import { LocalBwrapProvider } from '../../src/sandboxes/local/provider.ts';
import { OpenSandboxProvider } from '../../src/sandboxes/opensandbox/provider.ts';
import type { BoxReport } from '../../src/sandboxes/types.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';

const readOnlyMounts: string[] = [];

afterEach(() => {
  for (const m of readOnlyMounts.splice(0)) execFileSync('umount', [m]);
  removeTmpDirs();
});

/** A cgroup v1 tree (memory, pids, cpu) that even root cannot write: it sits on a read-only bind mount. */
function readOnlyCgroupTree(): CgroupPaths & { dir: string } {
  const dir = createTmpDir('vcfleet-ro-cgroup-');
  const sys = path.join(dir, 'sys');
  for (const c of ['memory', 'pids', 'cpu']) {
    mkdirSync(path.join(sys, c), { recursive: true });
    writeFileSync(path.join(sys, c, 'cgroup.procs'), '');
  }
  writeFileSync(path.join(dir, 'cgroup'), '4:memory:/\n8:pids:/\n1:cpu:/\n');
  const mounts = ['memory', 'pids', 'cpu'].map((c, i) => `${40 + i} 31 0:${30 + i} / /sys/fs/cgroup/${c} rw,relatime - cgroup cgroup rw,${c}`);
  writeFileSync(path.join(dir, 'mountinfo'), `${mounts.join('\n')}\n`);
  execFileSync('mount', ['--bind', sys, sys]);
  readOnlyMounts.push(sys);
  execFileSync('mount', ['-o', 'remount,bind,ro', sys]);
  return { dir, sysfsRoot: sys, procSelfCgroup: path.join(dir, 'cgroup'), mountinfo: path.join(dir, 'mountinfo') };
}

function logCapture(): { logger: ReturnType<typeof createLogger>; lines: () => Array<Record<string, unknown>> } {
  const stream = new PassThrough();
  const raw: string[] = [];
  stream.on('data', (d: Buffer) => raw.push(...d.toString().split('\n').filter(Boolean)));
  return { logger: createLogger({ level: 'info', destination: stream }), lines: () => raw.map((l) => JSON.parse(l)) };
}

describe('a host that cannot enforce the limits', () => {
  it('is reported, refused at worker start, and accepted with a warning when enforce_resources is false', async (ctx) => {
    if (process.getuid?.() !== 0) ctx.skip('needs root to make a read-only mount for the fake cgroup tree');
    const tree = readOnlyCgroupTree();
    const provider = () => new LocalBwrapProvider({ workdir: '/workspace', rootDir: path.join(tree.dir, 'sandboxes'), cgroupPaths: tree });

    const p1 = provider();
    const report = await p1.probe();
    for (const c of ['memory', 'pids', 'cpu'] as const) {
      expect(report[c]).toEqual({ enforced: false, detail: expect.stringContaining(`EROFS: read-only file system, mkdir '${tree.sysfsRoot}/${c}/vcfleet-`) });
    }
    expect(unenforced(report).map((m) => m.split(' ')[0])).toEqual(['memory', 'pids', 'cpu']);

    const strict = ConfigSchema.parse({ policy_api_key: 'pk-test' });
    const refused = await createAgentRunner(strict, logCapture().logger, { provider: p1 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConfigError);
    const msg = (refused as Error).message;
    expect(msg).toMatch(/^the local sandboxes cannot be held to their limits on this host: memory \(cannot set up the sandbox cgroup .*EROFS/);
    expect(msg).toContain('run the sandbox-worker as root');
    expect(msg).toContain('systemd-run --user --scope -p Delegate=yes');
    expect(msg).toContain('--cap-add SYS_ADMIN --cgroupns private');
    expect(msg).toMatch(/To run anyway without them: \+\+sandbox_config\.enforce_resources=false$/);

    const lenient = ConfigSchema.parse({ policy_api_key: 'pk-test', sandbox_config: { enforce_resources: false } });
    const { logger, lines } = logCapture();
    const reports: BoxReport[] = [];
    const p2 = provider();
    const runner = await createAgentRunner(lenient, logger, { provider: p2, onBoxReport: (r) => reports.push(r) });
    await runner.close();
    await p2.close();
    expect(reports).toHaveLength(1);
    expect(reports[0].memory.enforced).toBe(false);
    expect(reports[0].disk.enforced).toBe(true);
    const warn = lines().find((l) => l.level === 40)!;
    expect(warn.msg).toMatch(/^SANDBOX LIMITS NOT ENFORCED \(sandbox_config.enforce_resources=false\): sandboxed code may use more than memory, pids, cpu allow/);
    expect(warn.notEnforced).toHaveLength(3);
    expect(warn.box).toEqual(reports[0]);
  });
});

describe('box reports and limit hits', () => {
  it('OpenSandbox leaves every limit to its server', async () => {
    const p = new OpenSandboxProvider({ domain: 'http://osb.example:8080', image: 'img', ttlS: 60, workdir: '/workspace', resources: { cpu: 2, memory_mib: 4096 } });
    const report = await p.probe();
    expect(unenforced(report)).toEqual([]);
    expect(report.memory.detail).toBe('by the OpenSandbox server http://osb.example:8080: 4096Mi per sandbox');
  });

  it('names the first limit hit: memory, then pids, then disk', () => {
    const r = { cpu: 2, memory_mib: 2048, pids: 256, disk_mib: 4096 };
    expect(describeLimitHit({}, r)).toBeNull();
    expect(describeLimitHit({ memory: 0, pids: 0 }, r)).toBeNull();
    expect(describeLimitHit({ disk: 1, pids: 3, memory: 2 }, r)).toBe('the sandbox hit its 2048 MiB memory limit');
    expect(describeLimitHit({ disk: 1, pids: 3 }, r)).toBe('the sandbox hit its 256-process limit');
    expect(describeLimitHit({ disk: 1 }, r)).toBe('the sandbox hit its 4096 MiB disk limit');
  });
});
