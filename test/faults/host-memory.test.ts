/**
 * Admission by memory on a real host: a `vcfleet worker sandbox --concurrency auto` started inside a
 * memory cgroup of 2.5 GiB (an operator's or a container's limit) counts its slots from that limit,
 * and when something else in the cgroup takes the room (a process holding 1.5 GiB) it starts no
 * session, keeps every job's attempt, and says so; when that memory frees, the run completes.
 * Needs root and a writable memory cgroup (v1 or v2); skips with the reason otherwise.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { FAKE_POLICY_KEY, runCli, waitFor } from '../helpers/fleet.ts';
import { faultFleet } from './fault-fleet.ts';
import { countLines } from './fault-helpers.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const ROOT = path.resolve(import.meta.dirname, '../..');
const LIMIT = 2560 * 1024 * 1024;

/** A memory cgroup this test can make, or why not. */
function memoryCgroupRoot(): { dir: string; limitFile: string } | string {
  if (process.getuid?.() !== 0) return 'not root';
  if (existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes')) return { dir: '/sys/fs/cgroup/memory', limitFile: 'memory.limit_in_bytes' };
  const v2 = '/sys/fs/cgroup/cgroup.subtree_control';
  if (existsSync(v2) && readFileSync(v2, 'utf8').includes('memory')) return { dir: '/sys/fs/cgroup', limitFile: 'memory.max' };
  return 'no writable memory cgroup (neither v1 nor v2 with memory delegated)';
}

const where = memoryCgroupRoot();

describe.skipIf(typeof where === 'string')(`admission by memory inside a memory cgroup${typeof where === 'string' ? ` (skipped: ${where})` : ''}`, () => {
  const f = faultFleet();

  /** `command args` started inside the cgroup `cg` (it joins before it execs). */
  function inCgroup(cg: string, command: string, args: string[], env: Record<string, string> = {}): ChildProcess {
    const quoted = [command, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    return spawn('sh', ['-c', `echo $$ > '${path.join(cg, 'cgroup.procs')}' && exec ${quoted}`], {
      cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', VCFLEET_LOG_JSON: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
  }

  it('counts slots from the cgroup limit, holds off while another process takes the room, finishes once it frees', async () => {
    const { dir, limitFile } = where as { dir: string; limitFile: string };
    const cg = path.join(dir, `vcftest-mem-${randomBytes(3).toString('hex')}`);
    mkdirSync(cg);
    const started: ChildProcess[] = [];
    try {
      writeFileSync(path.join(cg, limitFile), String(LIMIT));
      const e = await f.env({ rows: 4, script: { '*': { answer: '@gold', delay_ms: 300 } } });
      const worker = inCgroup(cg, process.execPath, [path.join(ROOT, 'bin/vcfleet.js'), 'worker', 'sandbox', '--concurrency', 'auto', ...e.overrides,
        '++sandbox_config.resources.memory_mib=1024', '++queues.memory_reserve_mib=512'], { POLICY_API_KEY: FAKE_POLICY_KEY });
      started.push(worker);
      let out = '';
      worker.stdout!.on('data', (d) => (out += d));
      worker.stderr!.on('data', (d) => (out += d));
      await waitFor('the worker to count its slots', () => out.includes('rollout slots: 2 (auto, by memory)'), 30_000, 100);
      expect(out).toContain(`"source":"cgroup ${cg}"`);
      // Another process of the cgroup takes 1.5 GiB: what is left is less than a sandbox plus the reserve.
      const hog = inCgroup(cg, 'python3', ['-c', 'import time\nb = bytearray(1536 * 1024 * 1024)\nprint("held", flush=True)\ntime.sleep(600)']);
      started.push(hog);
      await new Promise<void>((resolve) => hog.stdout!.once('data', () => resolve()));
      expect((await runCli(['produce', '--run-id', 'hm', ...e.overrides])).code).toBe(0);
      f.start(['worker', 'judge', ...e.overrides]);
      f.start(['worker', 'results', ...e.overrides]);
      await waitFor('the worker to hold off', () => out.includes('not taking rollouts'), 30_000, 100);
      expect(out).toMatch(/not taking rollouts: \d[\d,]* MiB of memory free in cgroup [^;]+; a sandbox may use 1,024 MiB/);
      await sleep(3000);
      expect(countLines(e.output)).toBe(0);
      const rollouts = openQueue('rollout', f.redis, e.prefix);
      const waiting = await rollouts.getJobs(['wait', 'delayed', 'prioritized', 'active']);
      expect(waiting.length).toBe(4);
      for (const job of waiting) expect(job.attemptsMade).toBe(0);
      await rollouts.close();
      hog.kill('SIGKILL');
      await waitFor('4 rows', () => countLines(e.output) >= 4, 60_000, 200);
      expect(out).toContain('taking rollouts again: memory is free');
      expect(out.split('\n').filter((l) => l.includes('not taking rollouts'))).toHaveLength(1);
    } finally {
      for (const p of started) if (p.exitCode === null) p.kill('SIGKILL');
      await Promise.all(started.map((p) => (p.exitCode === null && p.signalCode === null ? new Promise((r) => p.once('exit', r)) : undefined)));
      for (let i = 0; i < 50 && existsSync(cg); i++) {
        try {
          rmdirSync(cg);
        } catch {
          await sleep(100); // the killed processes leave the cgroup a moment later
        }
      }
    }
  });
});
