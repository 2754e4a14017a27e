/**
 * A port that is taken (EADDRINUSE) on `view`, `dashboard` and `serve`: exit 2 with one line that says
 * another vcfleet may still be running there and gives the same command with `--port 0`, which,
 * pasted into a shell, starts on a free port.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { CLI, makeFleetEnv, runCli, waitFor, type FleetEnv } from '../helpers/fleet.ts';
import { captured } from '../helpers/processes.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('a taken port', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  let taken: net.Server;
  let port: number;
  beforeAll(async () => {
    env = await makeFleetEnv({ rows: 1, judgeUrl: judge.url });
    taken = net.createServer((socket) => socket.destroy()).listen(0, '127.0.0.1');
    await new Promise((r) => taken.once('listening', r));
    port = (taken.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((r) => taken.close(r));
    await env.cleanup();
    removeTmpDirs();
  });

  it('view, dashboard and serve: exit 2, "perhaps another vcfleet", the same command with --port 0; pasted, it starts on a free port', async () => {
    const file = path.join(env.dir, 'empty.jsonl');
    writeFileSync(file, '');
    const advised: string[] = [];
    for (const args of [['view', file, '--port', String(port)], ['dashboard', `--port=${port}`], ['serve', '--port', String(port), '--run-id', 'busy']]) {
      const r = await runCli([...args, ...env.overrides]);
      expect(r.code, r.output).toBe(2);
      expect(r.output).toContain(`127.0.0.1:${port} is already in use (EADDRINUSE): another program listens there, perhaps another vcfleet (view, dashboard, serve or stand-in) still running`);
      const command = /take any free port \(it prints the one it took\): `([^`]+)`/.exec(r.output)?.[1];
      expect(command, r.output).toMatch(new RegExp(`^${CLI} ${args[0]} .*--port 0$`));
      expect(command).not.toContain(String(port));
      advised.push(command!);
    }
    // The view's advice, pasted into a shell with nothing else set: it serves on another port.
    const shell = spawn('bash', ['-c', advised[0]], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const out = captured(shell);
    try {
      await waitFor('the viewer to start', () => /viewer: http:\/\/127\.0\.0\.1:\d+\//.test(out.output()), 60_000, 200);
      expect(out.output()).not.toContain(`:${port}/`);
    } finally {
      process.kill(-shell.pid!, 'SIGTERM');
      await out.exited;
    }
  }, 240_000);
});
