/**
 * Part of benchmark 7: could OpenCode be started before a task arrives? `opencode serve` is started
 * and warmed up (config, agents, a throw-away session) with the session's environment, then the task
 * is handed over through the server's HTTP API (a session, then the prompt with the image as a file
 * part) and the time to the first policy call is compared with a cold `opencode run`'s.
 *
 * Bare: on the host, the bench talks to the server. In the box: a sandbox with its gateway runs
 * bench/lib/warm-driver.py, which starts and warms the server on the sandbox's own loopback, says
 * READY, and waits for the task as a file that the worker puts into the workspace (the sandbox gets
 * no new way in); the policy calls go through the gateway as in a rollout.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../src/all-in-one/private-redis.ts';
import { startScriptedPolicyServer, type ScriptedPolicyServer } from '../src/demo/scripted-policy-server.ts';
import { scripts } from '../src/demo/scripted-policy-scripts.ts';
import { opencodeBinaryPath, opencodeRoBinds } from '../src/sandboxes/local/opencode-binary.ts';
import { buildOpenCodeConfig, buildOpenCodeEnv, PROVIDER_ID, seedFiles, sessionPaths } from '../src/agent/session-config.ts';
import { openSessionGateway } from '../src/agent/session-gateway.ts';
import { LocalBwrapProvider } from '../src/sandboxes/local/provider.ts';
import { discardLogger } from './lib/fleet.ts';
import { bareRun, bareSession, firstCallAt, harnessConfig, harnessRequest, IMAGE, MODEL, POLICY, PROMPT } from './lib/opencode-session.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, median } from './lib/stats.ts';

export interface WarmStartOptions {
  dir: string;
  runs: number;
  /** Seconds from OpenCode's start to its first call in the box, cold (measured by the caller). */
  coldBoxS: number;
  log?: (line: string) => void;
}

const DRIVER = path.join(import.meta.dirname, 'lib/warm-driver.py');
const seconds = (from: number, to: number) => (to - from) / 1000;

interface WarmRun {
  /** Spawn -> the server answers; -> warmed up (config, agents, a session). */
  listeningS: number;
  readyS: number;
  /** Hand-over -> first policy call; -> session idle with the answer. */
  toFirstCallS: number;
  toDoneS: number;
}

async function api(base: string, method: string, p: string, body?: unknown, timeoutMs = 120_000): Promise<any> {
  const r = await fetch(base + p, {
    method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${p}: HTTP ${r.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : null;
}

/** `opencode serve` on the host with the bare session's environment; the bench hands the task over. */
async function bareWarm(server: ScriptedPolicyServer, dir: string, id: string): Promise<WarmRun> {
  const session = bareSession(server, dir, id);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const q = `?directory=${encodeURIComponent(session.cwd)}`;
  const t0 = performance.now();
  const child = spawn(session.argv[0], ['serve', '--port', String(port), '--hostname', '127.0.0.1'], { cwd: session.cwd, env: session.env, stdio: 'ignore' });
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`opencode serve exited (${child.exitCode})`);
      // A short timeout: a request that reaches the server before it is ready can go unanswered (seen: 300 s).
      if (await api(base, 'GET', '/global/health', undefined, 1000).then(() => true, () => false)) break;
      await sleep(20);
    }
    const listening = performance.now();
    await api(base, 'GET', `/config${q}`);
    await api(base, 'GET', `/agent${q}`);
    await api(base, 'POST', `/session${q}`, { title: 'warm-up' });
    const ready = performance.now();
    const t1 = performance.now();
    const s = await api(base, 'POST', `/session${q}`, { title: `bench-warm-${id}` });
    const parts = [{ type: 'text', text: PROMPT }, { type: 'file', mime: 'image/png', filename: 'puzzle.png', url: `file://${session.cwd}/puzzle.png` }];
    await api(base, 'POST', `/session/${s.id}/prompt_async${q}`, { model: { providerID: PROVIDER_ID, modelID: MODEL }, parts });
    let busy = false;
    for (const deadline = Date.now() + 300_000; Date.now() < deadline; await sleep(25)) {
      const state = (await api(base, 'GET', `/session/status${q}`))[s.id]?.type ?? 'idle';
      busy ||= state !== 'idle';
      if (busy && state === 'idle') break;
    }
    const done = performance.now();
    const messages = (await api(base, 'GET', `/session/${s.id}/message${q}`)) as Array<{ parts: Array<{ type: string; text?: string }> }>;
    const text = messages.flatMap((m) => m.parts).filter((p) => p.type === 'text').pop()?.text ?? '';
    if (!text.includes('\\boxed{A}')) throw new Error(`the warm session ${id} did not answer A: ${text.slice(0, 200)}`);
    return { listeningS: seconds(t0, listening), readyS: seconds(t0, ready), toFirstCallS: seconds(t1, firstCallAt(server, t1)), toDoneS: seconds(t1, done) };
  } finally {
    child.kill('SIGTERM');
    session.remove();
  }
}

/** A sandbox with its gateway, the server warmed inside; the task goes in as files. */
async function boxWarm(server: ScriptedPolicyServer, dir: string, id: string): Promise<WarmRun & { sandboxUpS: number }> {
  const config = harnessConfig();
  const logger = discardLogger('warn');
  // The local provider, with the warm-start driver bound in beside OpenCode.
  const provider = new LocalBwrapProvider({ workdir: config.sandbox_workdir, extraRoBinds: [...opencodeRoBinds(config), path.dirname(DRIVER)], resources: config.sandbox_config.resources, hostUid: config.sandbox_config.host_uid, logger });
  const request = harnessRequest(config, server, dir, `bench-warm-box-${id}`);
  const token = `vcfleet-${randomBytes(18).toString('hex')}`;
  const gw = await openSessionGateway(
    { capabilities: provider.capabilities, socketDir: path.join(dir, 'sockets'), gatewayPort: config.sandbox_config.gateway_port, gatewayHost: null, logger },
    request, token, {},
  );
  const t0 = performance.now();
  const sandbox = await provider.create({ label: request.rolloutId, gateway: gw.spec });
  try {
    const sandboxUp = performance.now();
    const paths = sessionPaths(sandbox.workdir);
    for (const f of seedFiles(paths)) await sandbox.putFile(f.path, f.content);
    const ocConfig = buildOpenCodeConfig({ gatewayBaseUrl: `${sandbox.gatewayUrl}/v1`, accessToken: token, modelName: MODEL, ...POLICY });
    const marks: Record<string, number> = {};
    const handedOver = { at: 0 };
    const exec = sandbox.exec(['python3', DRIVER, opencodeBinaryPath(config), '4096', paths.workdir, PROVIDER_ID, MODEL], {
      cwd: paths.workdir,
      env: buildOpenCodeEnv(paths, ocConfig, POLICY.maxOutputTokens),
      timeoutMs: 300_000,
      onStdoutLine: (line) => {
        const word = line.split(' ')[0];
        marks[word] = performance.now();
        if (word === 'READY') {
          // The task arrives: its image and the hand-over file, the only way in.
          handedOver.at = performance.now();
          const image = `${paths.workdir}/puzzle.png`;
          void sandbox.putFile(image, IMAGE).then(() => sandbox.putFile(`${paths.workdir}/task.json`, JSON.stringify({ title: request.rolloutId, prompt: PROMPT, mime: 'image/png', image })));
        }
      },
    });
    const result = await exec;
    const done = marks.ANSWER;
    if (result.exitCode !== 0 || !result.stdout.includes('\\\\boxed{A}')) throw new Error(`the warm driver in the box failed (exit ${result.exitCode}): ${result.stdout.slice(-300)} ${result.stderr.slice(-500)}`);
    if (gw.gateway.stats().answered < 2) throw new Error(`the gateway saw ${gw.gateway.stats().answered} answered calls, expected 2`);
    return {
      sandboxUpS: seconds(t0, sandboxUp), listeningS: seconds(sandboxUp, marks.LISTENING), readyS: seconds(sandboxUp, marks.READY),
      toFirstCallS: seconds(handedOver.at, firstCallAt(server, handedOver.at)), toDoneS: seconds(handedOver.at, done),
    };
  } finally {
    await sandbox.destroy();
    await gw.gateway.close();
    await gw.cleanup();
    await provider.close();
  }
}

export async function benchWarmStart(opts: WarmStartOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const dir = mkdtempSync(path.join(opts.dir, 'warm-'));
  const server = await startScriptedPolicyServer({ script: scripts.pythonThenAnswer('A'), modelName: MODEL });
  try {
    const cold: number[] = [];
    const coldDone: number[] = [];
    const bare: WarmRun[] = [];
    const box: Array<WarmRun & { sandboxUpS: number }> = [];
    for (let i = 1; i <= opts.runs; i++) {
      const r = await bareRun(server, dir, `cold-${i}`);
      cold.push(seconds(r.startedAt, firstCallAt(server, r.startedAt)));
      coldDone.push(r.seconds);
      bare.push(await bareWarm(server, dir, String(i)));
      box.push(await boxWarm(server, dir, String(i)));
      log(`  warm start ${i}: cold run -> first call ${fmt(cold[i - 1])} s; warm hand-over -> first call ${fmt(bare[i - 1].toFirstCallS)} s bare, ${fmt(box[i - 1].toFirstCallS)} s in the box`);
    }
    const m = (xs: number[]) => fmt(median(xs));
    const bareFirst = median(bare.map((x) => x.toFirstCallS));
    const boxFirst = median(box.map((x) => x.toFirstCallS));
    return [
      {
        bench: '7 capacity', metric: 'warm start, bare: hand-over -> first call / cold `opencode run` -> first call', value: fmt(bareFirst / median(cold)),
        note: `medians of ${opts.runs}: ${fmt(bareFirst)} s vs ${m(cold)} s; \`opencode serve\` spawn -> answering ${m(bare.map((x) => x.listeningS))} s, -> warmed up (config, agents, a session) ${m(bare.map((x) => x.readyS))} s; hand-over -> answer ${m(bare.map((x) => x.toDoneS))} s vs cold run ${m(coldDone)} s`,
      },
      {
        bench: '7 capacity', metric: 'warm start, in the box: hand-over -> first call / cold OpenCode start -> first call', value: fmt(boxFirst / opts.coldBoxS),
        note: `medians of ${opts.runs}: ${fmt(boxFirst)} s vs ${fmt(opts.coldBoxS)} s (the in-process harness rows above); the task went in as files only (image, then task.json) to a server warmed inside the sandbox on its own loopback, the calls through the gateway; paid before the task: sandbox up ${m(box.map((x) => x.sandboxUpS))} s, server answering ${m(box.map((x) => x.listeningS))} s, warmed up ${m(box.map((x) => x.readyS))} s; hand-over -> answer ${m(box.map((x) => x.toDoneS))} s`,
      },
    ];
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

