/**
 * `./vcfleet`, the documented invocation, behaves as a program in a real terminal (tmux): one Ctrl-C
 * during `./vcfleet run …; echo EXIT=$?` gives the shell the documented exit code 4 and the rest of
 * the command line runs; the PID a user started is vcfleet's, and `kill` of it leaves nothing running
 * (not vcfleet, not its private Redis). The resume command it prints, pasted into a shell with only
 * the user's environment, resumes the run.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { makeFleetEnv, REDIS_URL, waitFor, type FleetEnv } from '../helpers/fleet.ts';
import { captured, processesMatching } from '../helpers/processes.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const quote = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
const hasTmux = (() => {
  try {
    execFileSync('tmux', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** Until one rollout of `runId` is active in `redisUrl`'s `prefix` (the agent is in its 10-minute delay). */
async function waitForActiveRollout(redisUrl: string, prefix: string, runId: string): Promise<void> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  const queue = openQueue('rollout', redis, prefix, { scope: runId });
  try {
    await waitFor('a rollout to run', async () => (await queue.getActiveCount()) > 0, 120_000, 200);
  } finally {
    await queue.close();
    redis.disconnect();
  }
}

describe.skipIf(!hasTmux)('./vcfleet in a terminal and under kill', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  beforeAll(async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url, script: { '*': { answer: '@gold', delay_ms: 600_000 } } });
  });
  afterAll(async () => {
    await env.cleanup();
    removeTmpDirs();
  });

  it('one Ctrl-C in tmux: the shell sees exit 4, the rest of the line runs, the resume command starts with ./vcfleet', async () => {
    const socket = `vcfleet-test-${process.pid}`;
    const tmux = (...args: string[]) => execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
    const screen = () => tmux('capture-pane', '-p', '-J', '-S', '-200', '-t', 't');
    // The user's settings in their own config file (VCFLEET_CONFIG), as a user keeps them: the
    // advice repeats where a run lives, not this host's settings (the judge, the agent, preflight).
    const doc: Record<string, unknown> = {};
    for (const o of env.overrides) {
      const [key, ...rest] = o.slice(2).split('=');
      const raw = rest.join('=');
      const parts = key.split('.');
      let at = doc;
      for (const p of parts.slice(0, -1)) at = (at[p] ??= {}) as Record<string, unknown>;
      at[parts.at(-1)!] = /^(true|false)$/.test(raw) ? raw === 'true' : /^\d+$/.test(raw) ? Number(raw) : raw;
    }
    const config = path.join(env.dir, 'my.yaml');
    writeFileSync(config, stringify(doc));
    const user = [`PATH=${process.env.PATH}`, `HOME=${process.env.HOME ?? '/tmp'}`, `VCFLEET_CONFIG=${config}`];
    const args = env.overrides.filter((o) => /^\+\+(queues\.prefix|state_dir)=/.test(o));
    execFileSync('env', ['-i', ...user, 'TERM=xterm',
      'tmux', '-L', socket, '-f', '/dev/null', 'new-session', '-d', '-s', 't', '-x', '400', '-y', '100', '-c', ROOT, 'bash --norc --noprofile']);
    try {
      const command = `./vcfleet run --run-id lc1 ${args.map(quote).join(' ')}; echo "EXIT=$?"; echo the-rest-ran`;
      tmux('send-keys', '-t', 't', '-l', command);
      tmux('send-keys', '-t', 't', 'Enter');
      await waitForActiveRollout(REDIS_URL, env.prefix, 'lc1');
      tmux('send-keys', '-t', 't', 'C-c');
      await waitFor('the command line to finish', () => /^the-rest-ran/m.test(screen()), 60_000, 200);
      const out = screen();
      expect(out).toMatch(/^EXIT=4$/m);
      expect(out).toContain('resume with: ./vcfleet run --run-id lc1');
      // The printed resume command, pasted into a shell with nothing but the user's environment: it resumes the run.
      const resume = /resume with: (\.\/vcfleet run --run-id lc1.*?)(?: \(Ctrl-C again to quit at once\))?$/m.exec(out)![1].trim();
      const shell = spawn('env', ['-i', ...user, 'sh', '-c', resume], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
      const pasted = captured(shell);
      const exited = pasted.exited.then((code) => ({ code }));
      const resumed = waitFor('the pasted command to resume the run', () => pasted.output().includes('resuming run lc1'), 120_000, 200).then(() => null);
      const early = await Promise.race([exited, resumed]);
      expect(early, `${resume}\n${pasted.output()}`).toBeNull();
      process.kill(-shell.pid!, 'SIGTERM'); // its shell and vcfleet (which hands the rollouts back)
      await pasted.exited;
      await waitFor('the pasted vcfleet to stop', () => processesMatching(`--run-id lc1 ++queues.prefix=${env.prefix}`).length === 0, 30_000, 100);
    } finally {
      tmux('kill-server');
    }
  }, 240_000);

  it('kill of the PID started as ./vcfleet: that PID is vcfleet, and nothing is left running, its private Redis included', async () => {
    const local = env.overrides.filter((o) => !o.startsWith('++redis_url='));
    const stateDir = local.find((o) => o.startsWith('++state_dir='))!.slice('++state_dir='.length);
    const child = spawn(path.join(ROOT, 'vcfleet'), ['run', '--run-id', 'lc2', ...local], {
      cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', VCFLEET_LOG_JSON: '1' }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = captured(child);
    const serverFile = path.join(stateDir, 'redis', 'server.json');
    await waitFor('the private Redis', () => existsSync(serverFile), 120_000, 200);
    const { port } = JSON.parse(readFileSync(serverFile, 'utf8')) as { port: number };
    await waitForActiveRollout(`redis://127.0.0.1:${port}`, env.prefix, 'lc2');
    // The launcher replaced itself with node: the PID the caller holds runs bin/vcfleet.js.
    expect(readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').replace(/\0/g, ' ')).toContain('bin/vcfleet.js run --run-id lc2');
    expect(processesMatching(stateDir).length).toBeGreaterThan(0);
    child.kill('SIGTERM');
    expect(await out.exited, out.output()).toBe(4);
    await waitFor('the private Redis to stop', () => processesMatching(stateDir).length === 0, 15_000, 100);
    expect(processesMatching(env.dir)).toEqual([]);
  }, 240_000);
});
