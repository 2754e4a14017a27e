/**
 * Teardown that sandboxed code cannot block: folders made unreadable (`chmod 000`), processes that
 * ignore SIGTERM and a full disk do not stop destroy; a rootless worker (no cgroups, no mounts)
 * reports what it cannot enforce and still cleans up after `chmod 000`; and a starting worker removes
 * what a dead one left (tmpfs mounts, cgroups with processes in them), logging what it cannot remove
 * instead of giving up.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/shared/logger.ts';
import { unenforced } from '../../../src/sandboxes/box-report.ts';
import { detectCgroupLayout } from '../../../src/sandboxes/local/cgroup-layout.ts';
import { LocalBwrapProvider } from '../../../src/sandboxes/local/provider.ts';
import { bootId } from '../../../src/sandboxes/proc-tree.ts';
import { cgroupName } from '../../../src/sandboxes/local/sandbox-cgroup.ts';
import { mountDisk } from '../../../src/sandboxes/local/sandbox-disk.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { passableTmpDir } from '../../helpers/tmp.ts';

const REPO = fileURLToPath(new URL('../../..', import.meta.url));
const ROOT = passableTmpDir('vcfleet-teardown-test-');
const LIMITS = { cpu: 1, memory_mib: 256, pids: 64, disk_mib: 16 };
const isRoot = process.getuid?.() === 0;
const DEAD = { pid: 2 ** 22 + 23, startTime: 1, bootId: bootId(), hostname: os.hostname() };

afterAll(() => {
  rmSync(ROOT, { recursive: true, force: true });
});

function mountsUnderRoot(): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.includes(ROOT));
}

describe('teardown the sandboxed code cannot block', () => {
  it('destroy removes a sandbox with chmod 000 folders, a full disk and a process that ignores SIGTERM', async (ctx) => {
    const dir = path.join(ROOT, 'chmod');
    const provider = new LocalBwrapProvider({ workdir: '/workspace', rootDir: dir, resources: LIMITS, killGraceMs: 300 });
    const report = await provider.probe();
    if (!isRoot || unenforced(report).length > 0) ctx.skip(`needs the whole box here: ${unenforced(report).join('; ') || 'not root'}`);
    const sb = await provider.create({ label: 'hostile', gateway: { port: 1 } });
    const hostile =
      'mkdir -p a/b/c /tmp/x/y && : > a/b/c/f && chmod 000 a/b/c a/b a /tmp/x/y /tmp/x; ' +
      'head -c 64M /dev/zero > /dev/shm/fill 2>/dev/null; trap "" TERM; setsid sh -c "trap \\"\\" TERM; sleep 600" & echo armed; sleep 600';
    const running = sb.exec(['sh', '-c', hostile], { onStdoutLine: () => void sb.destroy() });
    expect((await running).aborted).toBe(true);
    await sb.destroy();
    expect(await sb.limitHits()).toEqual({ disk: 1 });
    expect(readdirSync(dir)).toEqual([]);
    expect(mountsUnderRoot()).toEqual([]);
    const layout = await detectCgroupLayout();
    for (const p of new Set(Object.values(layout.places).map((x) => x.parent))) {
      expect(readdirSync(p).filter((n) => n.startsWith(`vcfleet-${process.pid}-`) && n.endsWith(sb.id))).toEqual([]);
    }
    await provider.close();
  });

  it('a rootless worker reports cgroups and disk as not enforced, keeps seccomp, and still removes chmod 000 folders', (ctx) => {
    if (!isRoot) ctx.skip('switches to uid 65534 to play the rootless worker; needs root to do so');
    const dir = path.join(ROOT, 'rootless');
    chmodSync(ROOT, 0o755);
    mkdirSync(dir);
    chownSync(dir, 65534, 65534);
    const script = path.join(dir, 'worker.mts');
    writeFileSync(
      script,
      `import { LocalBwrapProvider } from ${JSON.stringify(path.join(REPO, 'src/sandboxes/local/provider.ts'))};\n` +
        `const p = new LocalBwrapProvider({ workdir: '/workspace', rootDir: ${JSON.stringify(path.join(dir, 'sandboxes'))} });\n` +
        `const report = await p.probe();\n` +
        `const sb = await p.create({ label: 'rootless', gateway: { port: 1 } });\n` +
        `const r = await sb.exec(['sh', '-c', 'mkdir -p a/b && : > a/b/f && chmod 000 a/b a /tmp/home && id -u']);\n` +
        `await sb.destroy();\n` +
        `console.log(JSON.stringify({ report, uid: r.stdout.trim() }));\n`,
    );
    chmodSync(script, 0o644);
    const loader = pathToFileURL(path.join(REPO, 'node_modules/tsx/dist/loader.mjs')).href;
    const child = spawnSync(process.execPath, ['--import', loader, script], {
      uid: 65534, gid: 65534, cwd: dir, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir }, encoding: 'utf8', timeout: 60_000,
    });
    expect(child.stderr).toBe('');
    const { report, uid } = JSON.parse(child.stdout.trim().split('\n').pop()!);
    expect(uid).toBe('65534');
    for (const c of ['memory', 'pids', 'cpu']) expect(report[c]).toMatchObject({ enforced: false, detail: expect.stringMatching(/EACCES|EROFS|no cgroup/) });
    expect(report.disk).toMatchObject({ enforced: false, detail: expect.stringMatching(/needs root or CAP_SYS_ADMIN/) });
    expect(report.seccomp.enforced).toBe(true);
    expect(readdirSync(path.join(dir, 'sandboxes'))).toEqual([]);
  });
});

describe('reapOrphans after a dead worker', () => {
  it('unmounts its disks, kills and removes its cgroups, spares live ones, and logs what it cannot remove', async (ctx) => {
    if (!isRoot) ctx.skip('needs root: mounts, cgroups and chattr');
    const layout = await detectCgroupLayout();
    const pidsParent = layout.places.pids?.parent;
    if (!pidsParent) ctx.skip(`no pids cgroup here: ${layout.missing.pids}`);
    const root = path.join(ROOT, 'reap');
    const orphan = path.join(root, 'orphan-1');
    const stuck = path.join(root, 'stuck-1');
    for (const d of [orphan, stuck]) {
      mkdirSync(path.join(d, 'disk'), { recursive: true });
      writeFileSync(path.join(d, 'owner.json'), JSON.stringify(DEAD));
    }
    await mountDisk(path.join(orphan, 'disk'), 4);
    writeFileSync(path.join(stuck, 'immutable'), 'x');
    try {
      execFileSync('chattr', ['+i', path.join(stuck, 'immutable')], { stdio: 'ignore' });
    } catch {
      ctx.skip(`chattr +i is not supported on ${os.tmpdir()}`);
    }
    // A dead worker's cgroup with a process still in it, and a live worker's cgroup.
    const deadCg = path.join(pidsParent!, `vcfleet-${DEAD.pid}-1-orphan-1`);
    const liveCg = path.join(pidsParent!, cgroupName('live'));
    mkdirSync(deadCg);
    mkdirSync(liveCg);
    const straggler = spawn('/bin/sh', ['-c', `echo $$ > ${deadCg}/cgroup.procs && exec sleep 600`], { stdio: 'ignore' });
    const exited = new Promise((resolve) => straggler.once('exit', (_c, sig) => resolve(sig)));
    // Another test's worker starting meanwhile reaps dead workers' cgroups host-wide, this one included: then it is gone already.
    const joined = () => {
      try {
        return readFileSync(path.join(deadCg, 'cgroup.procs'), 'utf8').trim() !== '';
      } catch {
        return true;
      }
    };
    for (let i = 0; i < 50 && !joined(); i++) await sleep(20);

    const stream = new PassThrough();
    const lines: string[] = [];
    stream.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)));
    const provider = new LocalBwrapProvider({ workdir: '/workspace', rootDir: root, logger: createLogger({ level: 'info', destination: stream }) });
    try {
      // Cgroups are reaped host-wide, so a worker another test killed meanwhile may add to the count;
      // the folders under this test's own root are exactly one.
      expect(await provider.reapOrphans()).toBeGreaterThanOrEqual(1);
      expect(await exited).toBe('SIGKILL');
      expect(existsSync(orphan)).toBe(false);
      expect(existsSync(deadCg)).toBe(false);
      expect(existsSync(liveCg)).toBe(true);
      expect(mountsUnderRoot()).toEqual([]);
      const logged = lines.map((l) => JSON.parse(l));
      expect(logged.find((l) => l.msg === 'removed orphaned sandboxes')).toMatchObject({ folders: 1, root });
      const warn = logged.find((l) => l.level === 40);
      expect(warn).toMatchObject({ folder: stuck, msg: 'could not remove an orphaned sandbox folder' });
    } finally {
      execFileSync('chattr', ['-i', path.join(stuck, 'immutable')]);
      if (existsSync(liveCg)) rmdirSync(liveCg);
      await provider.close();
    }
  });
});
