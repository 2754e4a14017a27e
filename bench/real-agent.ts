/**
 * Benchmark 4, the real agent: the per-task time of the whole harness (`createOpenCodeRunner` with
 * the `local` bubblewrap provider: gateway up, sandbox up, files in, OpenCode session, the outcome,
 * transcript, teardown) against `opencode run` alone, on the host, with the same argv, environment
 * and seed files the runner uses, in a temp HOME, prompt on stdin. Both talk to the same scripted
 * policy server, which answers `\boxed{A}` at once. Runs alternate between the two sides after one
 * untimed warm-up run; medians are reported.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { RolloutRequest } from '../src/shared/agent.ts';
import { loadConfig } from '../src/shared/config.ts';
import { startScriptedPolicyServer, type ScriptedPolicyServer } from '../src/demo/scripted-policy-server.ts';
import { scripts } from '../src/demo/scripted-policy-scripts.ts';
import { opencodeBinaryPath, opencodeRoBinds } from '../src/workers/sandbox/opencode/binary.ts';
import { createOpenCodeRunner } from '../src/workers/sandbox/opencode/runner.ts';
import { buildOpenCodeConfig, buildOpenCodeEnv, buildRunArgv, seedFiles, sessionPaths } from '../src/workers/sandbox/opencode/session-config.ts';
import { createSandboxProvider, type Sandbox, type SandboxProvider } from '../src/workers/sandbox/sandboxes/index.ts';
import { encodePng } from '../src/demo/png.ts';
import { discardLogger } from './lib/fleet.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, median } from './lib/stats.ts';

export interface RealAgentOptions {
  dir: string;
  /** Timed runs of each side. Default 3. */
  runs: number;
  log?: (line: string) => void;
}

const MODEL = 'scripted-vlm';
const KEY = 'sk-bench-policy-key';
const PROMPT = 'Which half of the picture is red?\n(A) left\n(B) right\nGive the final answer as \\boxed{X}.';
const IMAGE = Buffer.from(encodePng(64, 48, (x) => (x < 32 ? [200, 20, 20] : [20, 20, 200])));
const POLICY = { contextWindow: 64000, maxOutputTokens: 2048, requestTimeoutS: 60 };

/** Seconds spent in each sandbox operation of the last rollout (create, files, exec, destroy). */
type Phases = Record<string, number>;

/** The real provider, timing what the runner asks of it. */
function timedProvider(inner: SandboxProvider, phases: Phases): SandboxProvider {
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
    async create(spec, signal): Promise<Sandbox> {
      const sb = await time('sandbox up', () => inner.create(spec, signal));
      let execs = 0;
      return {
        id: sb.id, workdir: sb.workdir, gatewayUrl: sb.gatewayUrl,
        putFile: (p, c) => time('files in', () => sb.putFile(p, c)),
        getFile: (p) => sb.getFile(p),
        exec: (argv, o) => time(execs++ === 0 ? 'OpenCode session' : 'other execs', () => sb.exec(argv, o)),
        limitHits: () => sb.limitHits(),
        destroy: () => time('teardown', () => sb.destroy()),
      };
    },
    reapOrphans: () => inner.reapOrphans(),
    probe: () => inner.probe(),
    close: () => inner.close(),
  };
}

async function harnessRun(server: ScriptedPolicyServer, dir: string, n: number): Promise<{ seconds: number; phases: Phases }> {
  const config = loadConfig({ env: {}, overrides: [`++policy_api_key=${KEY}`, '++agent.kind=opencode', '++sandbox_provider=local'] });
  const logger = discardLogger('warn');
  const phases: Phases = {};
  const provider = timedProvider(createSandboxProvider(config, { logger, extraRoBinds: opencodeRoBinds(config) }), phases);
  const runner = createOpenCodeRunner({ config, logger, provider, socketDir: path.join(dir, 'sockets') });
  const sha = createHash('sha256').update(IMAGE).digest('hex');
  const request: RolloutRequest = {
    runId: 'bench', rolloutId: `bench-harness-${n}`, repeat: 0,
    task: {
      task_id: `bench-${n}`, benchmark: 'babyvision_opencode', prompt: PROMPT, question: 'Which half is red?', gold: 'A',
      type: 'Fine-grained Discrimination', subtype: 'x', ans_type: 'choice', options: ['left', 'right'],
      image_sha256: sha, image_mime: 'image/png', image_file: 'x.png',
    },
    image: { bytes: IMAGE, mime: 'image/png', sha256: sha },
    policy: {
      baseUrl: server.url, apiKey: KEY, modelName: MODEL, capture: false, ...POLICY,
      maxRequestBytes: config.policy.max_request_mib * 1024 * 1024, maxConcurrentCalls: config.policy.max_concurrent_calls, maxCallsPerRollout: config.policy.max_calls_per_rollout,
    },
    timeoutS: 300,
    maxToolCalls: config.agent.max_tool_calls,
    captureDir: path.join(dir, 'captures'),
    transcript: { enabled: true, imageBudgetBytes: config.transcripts.max_image_mib * 1024 * 1024 },
  };
  const t = performance.now();
  try {
    const result = await runner.run(request, new AbortController().signal);
    if (result.extractedAnswer !== 'A') throw new Error(`harness run ${n} ended ${result.stopReason} without the scripted answer: ${result.error ?? ''}`);
    const seconds = (performance.now() - t) / 1000;
    phases['gateway, outcome, transcript, rest'] = seconds - Object.values(phases).reduce((a, b) => a + b, 0);
    return { seconds, phases };
  } finally {
    await runner.close();
    await provider.close();
  }
}

/** `opencode run` on the host, exactly as the runner invokes it, with the same seed files. */
async function bareRun(server: ScriptedPolicyServer, dir: string, n: number): Promise<number> {
  const root = mkdtempSync(path.join(dir, `bare-${n}-`));
  const paths = sessionPaths(path.join(root, 'workspace'));
  const imagePath = path.join(paths.workdir, 'puzzle.png');
  mkdirSync(paths.workdir, { recursive: true });
  writeFileSync(imagePath, IMAGE);
  for (const f of seedFiles(paths)) {
    mkdirSync(path.dirname(f.path), { recursive: true });
    writeFileSync(f.path, f.content);
  }
  const ocConfig = buildOpenCodeConfig({ gatewayBaseUrl: server.url, accessToken: KEY, modelName: MODEL, ...POLICY });
  const env = buildOpenCodeEnv(paths, ocConfig, POLICY.maxOutputTokens);
  const argv = buildRunArgv(opencodeBinaryPath(loadConfig({ env: {} })), MODEL, `bench-bare-${n}`, imagePath);
  const t = performance.now();
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { cwd: paths.workdir, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('exit', (c) => resolve({ code: c, stdout: out, stderr: err }));
    child.stdin.end(PROMPT);
  });
  const seconds = (performance.now() - t) / 1000;
  rmSync(root, { recursive: true, force: true });
  if (code !== 0 || !stdout.includes('\\\\boxed{A}')) throw new Error(`bare opencode run ${n} failed (exit ${code}): ${stderr.slice(-500)}`);
  return seconds;
}

export async function benchRealAgent(opts: RealAgentOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const dir = mkdtempSync(path.join(opts.dir, 'agent-'));
  const server = await startScriptedPolicyServer({ script: scripts.answer('\\boxed{A}'), modelName: MODEL });
  try {
    // One untimed run loads the binary into the page cache for both sides.
    await bareRun(server, dir, 0);
    const bare: number[] = [];
    const harness: number[] = [];
    const phases: Phases[] = [];
    for (let n = 1; n <= opts.runs; n++) {
      bare.push(await bareRun(server, dir, n));
      const h = await harnessRun(server, dir, n);
      harness.push(h.seconds);
      phases.push(h.phases);
      log(`  run ${n}: opencode alone ${fmt(bare[bare.length - 1])} s, whole harness ${fmt(h.seconds)} s`);
    }
    const [mb, mh] = [median(bare), median(harness)];
    const breakdown = Object.keys(phases[0]).map((k) => `${k} ${fmt(median(phases.map((p) => p[k] ?? 0)))} s`).join(', ');
    return [
      {
        bench: '4 real agent', metric: 'whole harness / `opencode run` alone, per task', value: fmt(mh / mb),
        note: `medians of ${opts.runs} runs each: ${fmt(mh)} s vs ${fmt(mb)} s (harness ${harness.map((x) => fmt(x)).join(', ')}; alone ${bare.map((x) => fmt(x)).join(', ')}); policy answers at once`,
      },
      { bench: '4 real agent', metric: 'fixed cost of the harness per task', value: `${fmt(mh - mb)} s`, note: `harness phases (medians): ${breakdown}` },
    ];
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
