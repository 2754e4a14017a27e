/**
 * What every fault test checks, in one place: the output JSONL is valid line by line with exactly one
 * row per rollout, the rewards equal those the scripted inputs give without any fault, and nothing
 * is left behind (processes, sandbox folders, secrets). Plus a private redis-server to break.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { Redis } from 'ioredis';
import type { Row } from '../../src/shared/records/rows.ts';
import type { AgentScriptSchema } from '../../src/agent/scripted-agent.ts';
import type { Fixture } from '../helpers/fixture-parquet.ts';
import { waitFor, type CliProcess } from '../helpers/fleet.ts';
import type { z } from 'zod';
import { readRowFile, readRowsStrict } from '../../src/shared/output/row-file.ts';
import { processesMatching } from '../helpers/processes.ts';
export { dumpPrefix } from '../helpers/redis-keys.ts';

type AgentScript = z.input<typeof AgentScriptSchema>;

/** Every line of an output JSONL, parsed as a row; fails on a cut, invalid or repeated line. */
export function readJsonl(file: string): Row[] {
  expect(readRowFile(file).cutTail, `${file} ends with a cut line`).toBe(false);
  return readRowsStrict(file);
}

/** Rows in the file so far (0 when it does not exist), without judging a line being written. */
export function countLines(file: string): number {
  if (!existsSync(file)) return 0;
  return readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).length;
}

/** Exactly one row per rollout of the run (tasks x repeats), and nothing else. */
export function expectOneRowEach(rows: Row[], runId: string, fixture: Fixture, repeats = 1): void {
  const want: string[] = [];
  for (let r = 0; r < repeats; r++) for (const t of fixture.expected) want.push(`${runId}-${t.task_id}-${r}`);
  expect(rows.map((r) => r.rollout_id).sort()).toEqual(want.sort());
}

/**
 * The reward each task gets from a scripted agent and the default scripted judge when nothing
 * breaks: 1 for the gold answer, 0 for another answer or none, null (masked) for a rollout whose
 * infrastructure fails on every attempt.
 */
export function expectedRewards(fixture: Fixture, script: AgentScript, attempts = 3): Map<string, 0 | 1 | null> {
  const norm = (s: string) => s.toLowerCase().replace(/\s+/g, '').replace(/\.$/, '').replace(/^\((.*)\)$/, '$1');
  const out = new Map<string, 0 | 1 | null>();
  for (const t of fixture.expected) {
    const e = script[t.task_id] ?? script['*'] ?? {};
    if ((e.infra_fail_attempts ?? 0) >= attempts) out.set(t.task_id, null);
    else if (e.stop_reason && e.stop_reason !== 'answered') out.set(t.task_id, 0);
    else {
      const answer = e.answer === undefined || e.answer === '@gold' ? t.gold : e.answer;
      out.set(t.task_id, answer !== null && norm(answer) === norm(t.gold) ? 1 : 0);
    }
  }
  return out;
}

export function expectRewards(rows: Row[], expected: Map<string, 0 | 1 | null>): void {
  const got = Object.fromEntries(rows.map((r) => [`${r.task_id}/${r.repeat}`, r.reward]));
  const want = Object.fromEntries(rows.map((r) => [`${r.task_id}/${r.repeat}`, expected.get(r.task_id)]));
  expect(got).toEqual(want);
}

// --- processes ------------------------------------------------------------------------------

export interface ProcId {
  pid: number;
  /** Start time in clock ticks (field 22 of /proc/<pid>/stat), so a reused pid is not confused. */
  start: string;
  cmd: string;
}

function statOf(pid: number): { ppid: number; start: string } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(fields[1]), start: fields[19] };
  } catch {
    return null;
  }
}

/** Every process below `root` (children, grandchildren, ...) right now. */
export function descendants(root: number): ProcId[] {
  const parent = new Map<number, number>();
  const info = new Map<number, ProcId>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const st = statOf(pid);
    if (!st) continue;
    parent.set(pid, st.ppid);
    let cmd = '';
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
    } catch {
      // exited meanwhile
    }
    info.set(pid, { pid, start: st.start, cmd });
  }
  const out: ProcId[] = [];
  const frontier = [root];
  while (frontier.length) {
    const p = frontier.pop()!;
    for (const [child, pp] of parent) {
      if (pp === p) {
        out.push(info.get(child)!);
        frontier.push(child);
      }
    }
  }
  return out;
}

/** The processes of `ids` that still run (same pid and start time). */
export function stillAlive(ids: ProcId[]): ProcId[] {
  return ids.filter((id) => statOf(id.pid)?.start === id.start);
}

/** Processes whose command line mentions `marker`, as `pid: command` lines (for a readable failure). */
export function processesMentioning(marker: string): string[] {
  return processesMatching(marker).map((p) => `${p.pid}: ${p.cmd.slice(0, 200)}`);
}

// --- secrets --------------------------------------------------------------------------------

/** Every regular file under `dir` (recursively), with its content as latin1 text. */
export function readTree(dir: string): Array<{ file: string; text: string }> {
  const out: Array<{ file: string; text: string }> = [];
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    const file = path.join(dir, name);
    const st = statSync(file, { throwIfNoEntry: false });
    if (!st) continue;
    if (st.isDirectory()) out.push(...readTree(file));
    else if (st.isFile()) out.push({ file, text: readFileSync(file).toString('latin1') });
  }
  return out;
}

// --- a redis-server of our own, to restart, stop and pause ------------------------------------

export { freePort } from '../../src/all-in-one/private-redis.ts';
import { freePort } from '../../src/all-in-one/private-redis.ts';

export interface OwnRedis {
  url: string;
  port: number;
  /** Start (or start again, reading back its AOF). */
  start(): Promise<void>;
  /** SHUTDOWN-like stop by SIGTERM (the AOF is flushed), waiting for the exit. */
  stop(): Promise<void>;
  /** SIGSTOP / SIGCONT: connections stay open but nothing answers. */
  pause(): void;
  resume(): void;
}

export async function startOwnRedis(dir: string): Promise<OwnRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const url = `redis://127.0.0.1:${port}`;
  const own: OwnRedis = {
    url,
    port,
    async start() {
      child = spawn('redis-server', [
        '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'everysec',
        '--maxmemory-policy', 'noeviction', '--save', '',
      ], { stdio: 'ignore' });
      await waitFor('redis-server to answer', async () => {
        const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
        probe.on('error', () => {});
        try {
          await probe.connect();
          const loading = (await probe.info('persistence')).includes('loading:1');
          return !loading;
        } catch {
          return false;
        } finally {
          probe.disconnect();
        }
      }, 20_000, 100);
    },
    async stop() {
      const c = child;
      if (!c || c.exitCode !== null) return;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await exited;
    },
    pause() {
      child?.kill('SIGSTOP');
    },
    resume() {
      child?.kill('SIGCONT');
    },
  };
  await own.start();
  return own;
}

/** SIGKILL every CLI process still running, and wait for all of them to exit. */
export async function killAll(procs: readonly CliProcess[]): Promise<void> {
  for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  await Promise.all(procs.map((p) => p.exited));
}
