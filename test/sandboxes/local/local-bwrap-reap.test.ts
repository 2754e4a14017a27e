/**
 * Reaping: a worker that starts removes the sandbox folders (and kills the sandbox processes, unmounts
 * the sandbox disks and removes the cgroups) that a dead worker of its host left behind, and leaves
 * live workers' and other hosts' folders alone.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { detectCgroupLayout } from '../../../src/sandboxes/local/cgroup-layout.ts';
import { LocalBwrapProvider } from '../../../src/sandboxes/local/provider.ts';
import { bootId, identityOf } from '../../../src/sandboxes/proc-tree.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { processesWith } from '../../helpers/processes.ts';
import { passableTmpDir } from '../../helpers/tmp.ts';

const REPO = fileURLToPath(new URL('../../..', import.meta.url));
const ROOT = passableTmpDir('vcfleet-reap-test-');
const SANDBOXES = path.join(ROOT, 'sandboxes');

/** A worker process that creates a sandbox, runs a long command in it, and says READY. */
function startWorker(marker: string): ReturnType<typeof spawn> {
  const script = path.join(ROOT, 'worker.mts');
  const provider = path.join(REPO, 'src/sandboxes/local/provider.ts');
  writeFileSync(
    script,
    `import { LocalBwrapProvider } from ${JSON.stringify(provider)};\n` +
      `const p = new LocalBwrapProvider({ workdir: '/workspace', rootDir: ${JSON.stringify(SANDBOXES)} });\n` +
      `const sb = await p.create({ label: 'doomed', gateway: { port: 1 } });\n` +
      `void sb.exec(['sh', '-c', 'setsid ${marker} & echo up; ${marker}'], { onStdoutLine: () => console.log('READY') });\n`,
  );
  // node itself with tsx's loader (not the tsx CLI, which would run the script in a grandchild).
  const loader = pathToFileURL(path.join(REPO, 'node_modules/tsx/dist/loader.mjs')).href;
  return spawn(process.execPath, ['--import', loader, script], { stdio: ['ignore', 'pipe', 'inherit'] });
}

let worker: ReturnType<typeof spawn> | undefined;

afterAll(() => {
  if (worker && worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
  rmSync(ROOT, { recursive: true, force: true });
});

describe('reapOrphans (local)', () => {
  it('removes the folder of a worker killed with SIGKILL, and nothing of it survives', async () => {
    const marker = `sleep ${920000 + (process.pid % 1000)}3`;
    worker = startWorker(marker);
    await new Promise<void>((resolve, reject) => {
      worker!.stdout!.on('data', (d: Buffer) => d.toString().includes('READY') && resolve());
      worker!.once('exit', (code) => reject(new Error(`worker exited early (${code})`)));
    });
    expect(readdirSync(SANDBOXES)).toHaveLength(1);
    const exited = new Promise((resolve) => worker!.once('exit', resolve));
    worker.kill('SIGKILL');
    await exited;
    // --die-with-parent acts as the worker dies; allow the kernel a moment.
    for (let i = 0; i < 50 && processesWith(marker).length > 0; i++) await sleep(100);
    expect(processesWith(marker)).toEqual([]);
    const deadCgroups = async (): Promise<string[]> => {
      const parents = new Set(Object.values((await detectCgroupLayout()).places).map((p) => p.parent));
      return [...parents].flatMap((p) => readdirSync(p).filter((n) => n.startsWith(`vcfleet-${worker!.pid}-`)));
    };
    if (process.getuid?.() === 0) {
      // As root the dead worker's sandbox had a tmpfs disk and cgroups: they outlive it until reaped.
      expect(readFileSync('/proc/self/mountinfo', 'utf8')).toContain(SANDBOXES);
      expect((await deadCgroups()).length).toBeGreaterThan(0);
    }
    const provider = new LocalBwrapProvider({ workdir: '/workspace', rootDir: SANDBOXES });
    expect(await provider.reapOrphans()).toBe(1);
    expect(readdirSync(SANDBOXES)).toEqual([]);
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(ROOT);
    expect(await deadCgroups()).toEqual([]);
  }, 60_000);

  it('kills recorded sandbox processes that outlived their dead owner; spares live and foreign owners', async () => {
    const marker = `sleep ${930000 + (process.pid % 1000)}4`;
    const straggler = spawn('sleep', [marker.split(' ')[1]!], { stdio: 'ignore' });
    await new Promise((resolve) => straggler.once('spawn', resolve));
    const dead = { pid: 2 ** 22 + 17, startTime: 1, bootId: bootId(), hostname: os.hostname() };
    const orphan = path.join(SANDBOXES, 'orphan-1');
    mkdirSync(path.join(orphan, 'execs'), { recursive: true });
    writeFileSync(path.join(orphan, 'owner.json'), JSON.stringify(dead));
    writeFileSync(path.join(orphan, 'execs', `${straggler.pid}.json`), JSON.stringify(identityOf(straggler.pid!)));
    const live = path.join(SANDBOXES, 'live-1');
    mkdirSync(live);
    writeFileSync(path.join(live, 'owner.json'), JSON.stringify(identityOf(process.pid)));
    const foreign = path.join(SANDBOXES, 'foreign-1');
    mkdirSync(foreign);
    writeFileSync(path.join(foreign, 'owner.json'), JSON.stringify({ ...dead, hostname: 'another-host' }));

    const exited = new Promise((resolve) => straggler.once('exit', (_c, sig) => resolve(sig)));
    const provider = new LocalBwrapProvider({ workdir: '/workspace', rootDir: SANDBOXES });
    expect(await provider.reapOrphans()).toBe(1);
    expect(await exited).toBe('SIGKILL');
    expect(existsSync(orphan)).toBe(false);
    expect(existsSync(live)).toBe(true);
    expect(existsSync(foreign)).toBe(true);
    rmSync(live, { recursive: true });
    rmSync(foreign, { recursive: true });
  });
});
