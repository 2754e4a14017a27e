/**
 * What the benchmarks of the real agent share (4 real agent, 7 capacity, 8 runtime heap): the task,
 * a sandbox provider that times what the runner asks of it (and may add to OpenCode's environment),
 * one rollout of the whole harness in this process, and one `opencode run` alone on the host with
 * the argv, environment and seed files the runner uses.
 */
import { runSettingsFrom } from '../../src/shared/config/run-settings.ts';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { AgentResult, RolloutRequest } from '../../src/shared/ports/agent.ts';
import { loadConfig, type Config } from '../../src/shared/config/load.ts';
import type { ScriptedPolicyServer } from '../../src/demo/scripted-policy-server.ts';
import { encodePng } from '../../src/demo/png.ts';
import { opencodeBinaryPath, opencodeRoBinds } from '../../src/sandboxes/local/opencode-binary.ts';
import { createOpenCodeRunner } from '../../src/agent/opencode-runner.ts';
import { buildOpenCodeConfig, buildOpenCodeEnv, buildRunArgv, seedFiles, sessionPaths } from '../../src/agent/session-config.ts';
import { createSandboxProvider, type Sandbox, type SandboxProvider } from '../../src/sandboxes/index.ts';
import { LocalBwrapProvider } from '../../src/sandboxes/local/provider.ts';
import { discardLogger } from './fleet.ts';

export const MODEL = 'scripted-vlm';
export const KEY = 'sk-bench-policy-key';
export const PROMPT = 'Which half of the picture is red?\n(A) left\n(B) right\nGive the final answer as \\boxed{X}.';
export const IMAGE = Buffer.from(encodePng(64, 48, (x) => (x < 32 ? [200, 20, 20] : [20, 20, 200])));
export const POLICY = { contextWindow: 64000, maxOutputTokens: 2048, requestTimeoutS: 60 };

/** Seconds spent in each sandbox operation of one rollout (create, files, exec, destroy). */
export type Phases = Record<string, number>;

export interface TimedProviderHooks {
  /** Added to the environment of every command (e.g. `BUN_JSC_forceRAMSize`). */
  extraEnv?: Record<string, string>;
  /** When OpenCode's command starts (performance.now()). */
  onSessionStart?(at: number): void;
}

/** The real provider, timing what the runner asks of it. */
export function timedProvider(inner: SandboxProvider, phases: Phases, hooks: TimedProviderHooks = {}): SandboxProvider {
  const time = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    try {
      return await fn();
    } finally {
      phases[name] = (phases[name] ?? 0) + (performance.now() - t) / 1000;
    }
  };
  return {
    name: inner.name,
    capabilities: inner.capabilities,
    async create(spec, signal): Promise<Sandbox> {
      const sb = await time('sandbox up', () => inner.create(spec, signal));
      let execs = 0;
      return {
        id: sb.id, workdir: sb.workdir, gatewayUrl: sb.gatewayUrl,
        putFile: (p, c) => time('files in', () => sb.putFile(p, c)),
        getFile: (p) => sb.getFile(p),
        exec: (argv, o = {}) => {
          const first = execs++ === 0;
          if (first) hooks.onSessionStart?.(performance.now());
          const options = hooks.extraEnv ? { ...o, env: { ...o.env, ...hooks.extraEnv } } : o;
          return time(first ? 'OpenCode session' : 'other execs', () => sb.exec(argv, options));
        },
        limitHits: () => sb.limitHits(),
        destroy: () => time('teardown', () => sb.destroy()),
      };
    },
    reapOrphans: () => inner.reapOrphans(),
    probe: () => inner.probe(),
    close: () => inner.close(),
  };
}

/** The config the in-process harness runs with: the real agent in `local` sandboxes. */
export function harnessConfig(overrides: string[] = []): Config {
  return loadConfig({ env: {}, overrides: [`++policy_api_key=${KEY}`, '++agent.kind=opencode', '++sandbox_provider=local', ...overrides] });
}

export function harnessRequest(config: Config, server: Pick<ScriptedPolicyServer, 'url'>, dir: string, id: string): RolloutRequest {
  const sha = createHash('sha256').update(IMAGE).digest('hex');
  return {
    runId: 'bench', rolloutId: id, repeat: 0,
    task: {
      task_id: id, benchmark: 'babyvision_opencode', prompt: PROMPT, question: 'Which half is red?', gold: 'A',
      type: 'Fine-grained Discrimination', subtype: 'x', ans_type: 'choice', options: ['left', 'right'],
      image_sha256: sha, image_mime: 'image/png', image_file: 'x.png',
    },
    image: { bytes: IMAGE, mime: 'image/png', sha256: sha },
    policy: {
      baseUrl: server.url, apiKey: KEY, model: MODEL,
      settings: { ...runSettingsFrom(config).policy, context_window: POLICY.contextWindow, max_output_tokens: POLICY.maxOutputTokens, request_timeout_s: POLICY.requestTimeoutS },
    },
    timeoutS: 300,
    agent: runSettingsFrom(config).agent,
    captureDir: path.join(dir, 'captures'),
    transcript: { enabled: true, imageBudgetBytes: config.transcripts.max_image_mib * 1024 * 1024 },
  };
}

export interface HarnessRun {
  seconds: number;
  phases: Phases;
  result: AgentResult;
  /** performance.now() at the start of the rollout and when OpenCode's command started. */
  startedAt: number;
  sessionStartedAt: number;
}

/** One rollout of the whole harness (gateway, sandbox, files, OpenCode, outcome, transcript, teardown). */
export interface HarnessRunOptions {
  extraEnv?: Record<string, string>;
  overrides?: string[];
  /** false: the same `local` sandboxes without their limits (no cgroup, tmpfs disk, seccomp, rlimits). */
  box?: boolean;
}

export async function harnessRun(server: ScriptedPolicyServer, dir: string, id: string, opts: HarnessRunOptions = {}): Promise<HarnessRun> {
  const config = harnessConfig(opts.overrides);
  const logger = discardLogger('warn');
  const phases: Phases = {};
  let sessionStartedAt = Number.NaN;
  const hooks = { extraEnv: opts.extraEnv, onSessionStart: (at: number) => (sessionStartedAt = at) };
  const inner = opts.box === false
    ? new LocalBwrapProvider({ workdir: config.sandbox_workdir, extraRoBinds: opencodeRoBinds(config), box: false, logger })
    : createSandboxProvider(config, { logger });
  const provider = timedProvider(inner, phases, hooks);
  const runner = createOpenCodeRunner({ config, logger, provider, socketDir: path.join(dir, 'sockets') });
  const startedAt = performance.now();
  try {
    const result = await runner.run(harnessRequest(config, server, dir, id), new AbortController().signal);
    if (result.outcome.extracted_answer !== 'A') throw new Error(`harness run ${id} ended ${result.outcome.stop_reason} without the scripted answer: ${result.outcome.error ?? ''}`);
    const seconds = (performance.now() - startedAt) / 1000;
    phases['gateway, outcome, transcript, rest'] = seconds - Object.values(phases).reduce((a, b) => a + b, 0);
    return { seconds, phases, result, startedAt, sessionStartedAt };
  } finally {
    await runner.close();
    await provider.close();
  }
}

/** A session folder on the host laid out as the runner lays out a sandbox's workspace. */
export interface BareSession {
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  remove(): void;
}

export function bareSession(server: ScriptedPolicyServer, dir: string, id: string, extraEnv: Record<string, string> = {}): BareSession {
  const root = mkdtempSync(path.join(dir, `bare-${id}-`));
  const paths = sessionPaths(path.join(root, 'workspace'));
  const imagePath = path.join(paths.workdir, 'puzzle.png');
  mkdirSync(paths.workdir, { recursive: true });
  writeFileSync(imagePath, IMAGE);
  for (const f of seedFiles(paths)) {
    mkdirSync(path.dirname(f.path), { recursive: true });
    writeFileSync(f.path, f.content);
  }
  const ocConfig = buildOpenCodeConfig({ gatewayBaseUrl: server.url, accessToken: KEY, modelName: MODEL, ...POLICY });
  const env = { ...buildOpenCodeEnv(paths, ocConfig, POLICY.maxOutputTokens), ...extraEnv };
  const argv = buildRunArgv(opencodeBinaryPath(loadConfig({ env: {} })), MODEL, `bench-bare-${id}`, imagePath);
  return { argv, env, cwd: paths.workdir, remove: () => rmSync(root, { recursive: true, force: true }) };
}

export interface BareRun {
  seconds: number;
  /** performance.now() when the process was spawned. */
  startedAt: number;
}

/** `opencode run` on the host, exactly as the runner invokes it, prompt on stdin; throws unless it answers A. */
export async function bareRun(server: ScriptedPolicyServer, dir: string, id: string, opts: { extraEnv?: Record<string, string>; onSpawn?(pid: number): void } = {}): Promise<BareRun> {
  const session = bareSession(server, dir, id, opts.extraEnv);
  const startedAt = performance.now();
  try {
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(session.argv[0], session.argv.slice(1), { cwd: session.cwd, env: session.env, stdio: ['pipe', 'pipe', 'pipe'] });
      if (child.pid !== undefined) opts.onSpawn?.(child.pid);
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (err += d));
      child.on('error', reject);
      child.on('exit', (c) => resolve({ code: c, stdout: out, stderr: err }));
      child.stdin.end(PROMPT);
    });
    const seconds = (performance.now() - startedAt) / 1000;
    if (code !== 0 || !stdout.includes('\\\\boxed{A}')) throw new Error(`bare opencode run ${id} failed (exit ${code}): ${stderr.slice(-500)}`);
    return { seconds, startedAt };
  } finally {
    session.remove();
  }
}

/** performance.now() of the first chat call a scripted server received at or after `since` (performance.now()). */
export function firstCallAt(server: ScriptedPolicyServer, since: number): number {
  const offset = Date.now() - performance.now();
  const hit = server.requests.find((r) => r.path.endsWith('/chat/completions') && r.receivedAt - offset >= since - 1);
  return hit ? hit.receivedAt - offset : Number.NaN;
}
