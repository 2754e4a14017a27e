/**
 * The real OpenCode binary in real `local` (bubblewrap) sandboxes, driven by the scripted policy
 * server through the per-task gateway. Each run costs ~10 s of CPU, so the runs are few and
 * sequential.
 */
import type { PolicySettings } from '../../src/shared/config/run-settings.ts';
import { rolloutPolicy } from '../helpers/policy.ts';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AgentResult, RolloutRequest } from '../../src/shared/ports/agent.ts';
import type { TranscriptRecord } from '../../src/shared/records/transcript.ts';
import { ConfigSchema, type Config } from '../../src/shared/config/load.ts';
import { InfraError } from '../../src/shared/errors.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { opencodeRoBinds } from '../../src/sandboxes/local/opencode-binary.ts';
import { createOpenCodeRunner } from '../../src/agent/opencode-runner.ts';
import { LocalBwrapProvider } from '../../src/sandboxes/local/provider.ts';
import type { ExecOptions, Sandbox, SandboxProvider, SandboxSpec } from '../../src/sandboxes/types.ts';
import { encodePng } from '../helpers/fixture-images.ts';
import { scripts, startScriptedPolicyServer, type Script, type ScriptedPolicyServer } from '../helpers/scripted-policy-server.ts';
import { processesMatching, processesWith } from '../helpers/processes.ts';

/** A process's state, parent and cgroups (for a failure message). */
function statusOf(pid: number): string {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').filter((l) => /^(State|PPid|NSpid):/.test(l)).join('; ');
    return `${status}; cgroup ${readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().replace(/\n/g, ' ')}`;
  } catch {
    return 'gone';
  }
}
import { waitFor } from '../helpers/fleet.ts';
import { passableTmpDir } from '../helpers/tmp.ts';

const KEY = 'sk-policy-secret-7f3a9c';
const ROOT = passableTmpDir('vcfleet-oc-test-');
const SANDBOX_ROOT = path.join(ROOT, 'sandboxes');
const SOCKET_DIR = path.join(ROOT, 'sockets');
const IMAGE = Buffer.from(encodePng(64, 48, (x, y) => (x < 32 ? [200, 20, 20] : [20, 20, 200 - (y % 2)])));

interface ExecRecord { argv: string[]; env?: Record<string, string>; stdin?: string }

/** The real local provider, recording what the runner asks it to run. */
function recordingProvider(inner: SandboxProvider, execs: ExecRecord[]): SandboxProvider {
  return {
    name: inner.name,
    capabilities: inner.capabilities,
    async create(spec: SandboxSpec, signal?: AbortSignal): Promise<Sandbox> {
      const sb = await inner.create(spec, signal);
      return {
        id: sb.id, workdir: sb.workdir, gatewayUrl: sb.gatewayUrl,
        putFile: (p, c) => sb.putFile(p, c),
        getFile: (p) => sb.getFile(p),
        exec: (argv: string[], options?: ExecOptions) => {
          execs.push({ argv, env: options?.env, stdin: options?.stdin });
          return sb.exec(argv, options);
        },
        limitHits: () => sb.limitHits(),
        destroy: () => sb.destroy(),
      };
    },
    reapOrphans: () => inner.reapOrphans(),
    probe: () => inner.probe(),
    close: () => inner.close(),
  };
}

describe('OpenCode runner (real binary, local bwrap sandbox)', () => {
  const logger = createLogger({ level: 'warn', secrets: [KEY], name: 'oc-test' });
  let inner: LocalBwrapProvider;
  let server: ScriptedPolicyServer;
  let captureDir: string;
  let maxToolCalls = 200;
  let execs: ExecRecord[];
  let counter = 0;

  beforeAll(async () => {
    const config = ConfigSchema.parse({});
    inner = new LocalBwrapProvider({ rootDir: SANDBOX_ROOT, workdir: '/workspace', extraRoBinds: opencodeRoBinds(config), logger });
    server = await startScriptedPolicyServer();
  });
  afterAll(async () => {
    await inner.close();
    await server.close();
    rmSync(ROOT, { recursive: true, force: true });
  });
  afterEach(() => {
    // Nothing may outlive a rollout: no sandbox folder, process, mount or gateway socket.
    expect(existsSync(SANDBOX_ROOT) ? readdirSync(SANDBOX_ROOT) : []).toEqual([]);
    expect(existsSync(SOCKET_DIR) ? readdirSync(SOCKET_DIR) : []).toEqual([]);
    expect(processesWith(ROOT)).toEqual([]);
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(ROOT);
    server.requests.length = 0;
    server.notes.length = 0;
  });

  function setup(script: Script, overrides: Record<string, unknown> = {}, limits = { maxConsecutiveFailures: 3, maxFailingS: 60 }) {
    server.setScript(script);
    execs = [];
    captureDir = path.join(ROOT, `captures-${++counter}`);
    const config: Config = ConfigSchema.parse({ policy_api_key: KEY, ...overrides });
    maxToolCalls = config.agent.max_tool_calls;
    const provider = recordingProvider(inner, execs);
    const runner = createOpenCodeRunner({ config, logger, provider, socketDir: SOCKET_DIR, upstreamFailureLimits: limits });
    return { config, runner };
  }

  /** A rollout of the next task; `settings` lay over the run's policy section, `baseUrl` over the scripted server. */
  function request({ baseUrl = server.url, ...settings }: Partial<PolicySettings> & { baseUrl?: string } = {}, timeoutS = 100): RolloutRequest {
    return {
      runId: 'run-test', rolloutId: `task-${counter}:r0`, repeat: 0,
      task: {
        task_id: `task-${counter}`, benchmark: 'babyvision_opencode', gold: 'B', type: 'Fine-grained Discrimination', subtype: 'x',
        prompt: 'Which half of the picture is red?\n(A) right\n(B) left\nGive the final answer as \\boxed{X}.',
        question: 'Which half is red?', ans_type: 'choice', options: ['right', 'left'],
        image_sha256: createHash('sha256').update(IMAGE).digest('hex'), image_mime: 'image/png', image_file: 'x.png',
      },
      image: { bytes: IMAGE, mime: 'image/png', sha256: createHash('sha256').update(IMAGE).digest('hex') },
      policy: rolloutPolicy(baseUrl, { apiKey: KEY, model: 'scripted-vlm', settings: { context_window: 64000, max_output_tokens: 2048, request_timeout_s: 60, ...settings } }),
      timeoutS,
      agent: { max_tool_calls: maxToolCalls },
      captureDir,
      transcript: { enabled: true, imageBudgetBytes: 32 * 1024 * 1024 },
    };
  }

  function transcript(result: AgentResult): TranscriptRecord {
    expect(result.transcript).not.toBeNull();
    expect(JSON.stringify(result.transcript!.record)).not.toContain(KEY);
    return result.transcript!.record;
  }

  it('bash + python on the puzzle image, then a boxed answer; the key stays out of the sandbox', async () => {
    const { runner } = setup(scripts.pythonThenAnswer('B'));
    const result = await runner.run(request({ capture: true }), new AbortController().signal);
    console.log(`[timing] python+answer: ${result.outcome.wall_s.toFixed(1)} s`);
    expect(result.outcome).toMatchObject({ stop_reason: 'answered', extracted_answer: 'B', turns: 2, tool_calls: 1 });
    expect(result.outcome.input_tokens).toBeGreaterThan(1000);
    expect(result.outcome.output_tokens).toBeGreaterThan(0);
    expect(result.outcome.response_tail).toContain('size 64 48 RGB');
    // The transcript comes from what the gateway saw: each turn, the tool call joined with its output.
    const t = transcript(result);
    expect(t.turns.map((turn) => turn.finish_reason)).toEqual(['tool_calls', 'stop']);
    expect(t.turns[0].shown_images).toEqual([request().image.sha256]);
    expect(t.turns[0].tool_calls[0]).toMatchObject({ name: 'bash' });
    expect(t.turns[0].tool_calls[0].output).toContain('size 64 48 RGB');
    expect(t.turns[1].text).toContain('\\boxed{B}');
    expect(t.outcome).toMatchObject({ stop_reason: 'answered', extracted_answer: 'B' });
    expect(result.transcript!.images.get(request().image.sha256)?.bytes.equals(IMAGE)).toBe(true);
    expect(server.requests.map((r) => r.path)).toEqual(['/v1/chat/completions', '/v1/chat/completions']);
    for (const r of server.requests) expect(r.headers.authorization).toBe(`Bearer ${KEY}`);
    // The reference's tools, todowrite included; webfetch, task and skill are not offered.
    const tools = (server.requests[0].body!.tools as Array<{ function: { name: string } }>).map((x) => x.function.name).sort();
    expect(tools).toEqual(['bash', 'edit', 'glob', 'grep', 'read', 'todowrite', 'write']);
    // The prompt went verbatim on stdin (no added quotes) after the image.
    const first = server.requests[0].body!.messages!.find((m) => m.role === 'user')!;
    const parts = first.content as Array<{ type: string; text?: string }>;
    expect(parts.some((p) => p.type === 'image_url')).toBe(true);
    expect(parts.at(-1)!.text).toBe(request().task.prompt);
    // Nothing the sandbox received holds the key; the config and flags are as designed.
    expect(JSON.stringify(execs)).not.toContain(KEY);
    const env = execs[0].env!;
    for (const flag of ['OPENCODE_DISABLE_MODELS_FETCH', 'OPENCODE_DISABLE_AUTOUPDATE', 'OPENCODE_DISABLE_PROJECT_CONFIG', 'OPENCODE_DISABLE_DEFAULT_PLUGINS', 'OPENCODE_DISABLE_SHARE', 'OPENCODE_DISABLE_AUTOCOMPACT', 'OPENCODE_DISABLE_LSP_DOWNLOAD']) expect(env[flag]).toBe('1');
    expect(env.OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX).toBe('2048');
    const ocConfig = JSON.parse(env.OPENCODE_CONFIG_CONTENT);
    expect(ocConfig.provider.policy.options.baseURL).toBe('http://127.0.0.1:18080/v1');
    expect(ocConfig.permission).toMatchObject({ '*': 'allow', webfetch: 'deny' });
    // capture: one line per call, images as placeholders, no key.
    const calls = readFileSync(path.join(captureDir, `task-${counter}_r0.calls.jsonl`), 'utf8');
    expect(calls.trim().split('\n')).toHaveLength(2);
    expect(calls).not.toContain(KEY);
    expect(calls).not.toContain(';base64,');
    expect(calls).toMatch(/<image sha256=/);
  });

  it('read of the puzzle image comes back to the model as an image part', async () => {
    const { runner } = setup(scripts.readImageThenAnswer('\\text{B}'));
    const result = await runner.run(request(), new AbortController().signal);
    console.log(`[timing] read+answer: ${result.outcome.wall_s.toFixed(1)} s`);
    expect(server.notes).toEqual(['image-after-read']);
    expect(result.outcome).toMatchObject({ stop_reason: 'answered', extracted_answer: 'B', tool_calls: 1 });
    // The image that `read` returned is in the transcript, at the tool call that returned it.
    const readCall = transcript(result).turns[0].tool_calls[0];
    expect(readCall.name).toBe('read');
    expect(readCall.images).toHaveLength(1);
    expect(result.transcript!.images.get(readCall.images[0])?.bytes.length).toBeGreaterThan(0);
  });

  it('a model that never boxes ends with no_answer', async () => {
    const { runner } = setup(scripts.neverBox());
    const result = await runner.run(request(), new AbortController().signal);
    console.log(`[timing] no_answer: ${result.outcome.wall_s.toFixed(1)} s`);
    expect(result.outcome).toMatchObject({ stop_reason: 'no_answer', extracted_answer: null, turns: 1, tool_calls: 0 });
    expect(result.outcome.response_tail).toMatch(/not sure/);
  });

  it('finish_reason length without an answer is output_cap', async () => {
    const { runner } = setup(scripts.lengthCut());
    const result = await runner.run(request(), new AbortController().signal);
    expect(result.outcome).toMatchObject({ stop_reason: 'output_cap', extracted_answer: null });
  });

  it('a context-length error is context_limit', async () => {
    const { runner } = setup(scripts.contextOverflow());
    const result = await runner.run(request(), new AbortController().signal);
    expect(result.outcome.stop_reason).toBe('context_limit');
    expect(result.outcome.error).toMatch(/maximum context length/);
    expect(server.requests).toHaveLength(1);
  });

  it('the task timeout stops a long tool call: timeout, and its processes are gone', async () => {
    const { runner } = setup((body) =>
      body.messages!.some((m) => m.role === 'tool') ? { kind: 'text', text: '\\boxed{A}' } : { kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: 'sleep 300' } }] },
    );
    // 40 s: enough for OpenCode's first call even on a loaded 2-core box (else it would be an InfraError).
    const result = await runner.run(request({}, 40), new AbortController().signal);
    expect(result.outcome.stop_reason).toBe('timeout');
    expect(result.outcome.wall_s).toBeGreaterThanOrEqual(40);
    // Killed with the sandbox; on a loaded host the kernel may take a moment to finish the kill
    // (once, in CI with every suite running, more than 5 s): say which process is left if one is.
    await waitFor('the tool\'s process to be gone', () => processesWith('sleep 300').length === 0, 15_000, 50).catch((err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify(processesMatching('sleep 300').map((p) => ({ ...p, status: statusOf(p.pid) })))}`);
    });
  });

  it('more tool calls than agent.max_tool_calls stop the session (stop reason timeout, said in error)', async () => {
    const { runner } = setup(scripts.toolLoop(), { agent: { max_tool_calls: 2 } });
    const result = await runner.run(request(), new AbortController().signal);
    expect(result.outcome.stop_reason).toBe('timeout');
    expect(result.outcome.error).toMatch(/tool-call budget/);
    expect(result.outcome.tool_calls).toBe(3);
  });

  it("the worker's abort signal stops the session, throws InfraError and cleans up", async () => {
    const { runner } = setup(scripts.pythonThenAnswer('B'));
    const abort = new AbortController();
    setTimeout(() => abort.abort(new Error('shutdown')), 3_000);
    // Unaborted, this script answers: an InfraError naming the abort is the abort's doing.
    const err = await runner.run(request(), abort.signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InfraError);
    expect((err as Error).message).toMatch(/aborted/);
  });

  it('a policy server that answers 500 is an InfraError, quickly', async () => {
    const { runner } = setup(scripts.fail(500));
    const started = Date.now();
    const err = await runner.run(request({}, 150), new AbortController().signal).catch((e: unknown) => e);
    const wallS = (Date.now() - started) / 1000;
    console.log(`[timing] 500 -> InfraError after ${wallS.toFixed(1)} s`);
    expect(err).toBeInstanceOf(InfraError);
    expect((err as Error).message).toMatch(/3 calls in a row.*5xx/);
    // ~6 s of OpenCode's retries after its first call, far from the 150 s task budget (even on a loaded box).
    expect(wallS).toBeLessThan(90);
    expect(server.requests.length).toBe(3);
  });

  it('a policy server that is down (connection refused) is an InfraError', async () => {
    const down = await startScriptedPolicyServer();
    const url = down.url;
    await down.close();
    const { runner } = setup(scripts.answer('\\boxed{A}'));
    const err = await runner.run(request({ baseUrl: url }, 100), new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InfraError);
    expect((err as Error).message).toMatch(/connection_refused/);
    expect((err as Error).message).not.toContain(KEY);
  });

  it('a policy server that accepts calls and never answers scores timeout, not a masked row', async () => {
    const { runner } = setup(scripts.hang());
    const result = await runner.run(request({ request_timeout_s: 5 }, 100), new AbortController().signal);
    expect(result.outcome).toMatchObject({ stop_reason: 'timeout', extracted_answer: null, turns: 0 });
    expect(result.outcome.error).toMatch(/accepted 1 call\(s\) and answered none within policy.request_timeout_s \(5 s\)/);
  });
});
