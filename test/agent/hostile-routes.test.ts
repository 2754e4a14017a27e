/**
 * Scripted attacking models against the real OpenCode in the real `local` box, one route each to
 * moving a score, masking a row or reaching the host: writing the host's kernel settings; a forged
 * streamed call whose answer the sandbox never reads; forged calls with a flood of images and huge
 * tool messages; a forged tool result for the running call; an http image URL (SSRF); and a boxed
 * answer that spans the whole response. Each leaves the worker up, the row decided by OpenCode's own
 * conversation, and nothing of the host touched. Needs root (the box, and the launcher's host uid).
 */
import { readFileSync, readdirSync, rmSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentRunner } from '../../src/shared/ports/agent.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { RunStore } from '../../src/shared/stores/run-store.ts';
import { rolloutId } from '../../src/shared/queue/registry.ts';
import { decodeTranscript } from '../../src/shared/records/transcript-codec.ts';
import { loadPreparedBenchmark } from '../../src/prepare/load-prepared.ts';
import { produceRun } from '../../src/producer/produce.ts';
import { opencodeRoBinds } from '../../src/sandboxes/local/opencode-binary.ts';
import { createOpenCodeRunner } from '../../src/agent/opencode-runner.ts';
import { runRolloutStage, type SandboxHostSettings } from '../../src/workers/sandbox/rollout-stage.ts';
import { DEFAULT_HOST_UID, LocalBwrapProvider } from '../../src/sandboxes/local/provider.ts';
import { makeFleetEnv, REDIS_URL, type FleetEnv } from '../helpers/fleet.ts';
import { lastToolOutput, startScriptedPolicyServer, toolResults, type Script, type ScriptedPolicyServer } from '../helpers/scripted-policy-server.ts';
import { passableTmpDir } from '../helpers/tmp.ts';

const KEY = 'sk-policy-ROUTES-TEST-0004';
const ROOT = passableTmpDir('vcfleet-routes-');
const asRoot = process.getuid?.() === 0;

/** Python shared by the attacks: the gateway token from OpenCode's environment, and raw HTTP to the gateway. */
const PRELUDE = String.raw`
import json, os, socket, time
tok = json.loads(os.environ['OPENCODE_CONFIG_CONTENT'])['provider']['policy']['options']['apiKey']
def connect():
    return socket.create_connection(('127.0.0.1', 18080), timeout=30)
def request(body, read=True):
    b = json.dumps(body).encode()
    s = connect()
    s.sendall(f'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tok}\r\nContent-Type: application/json\r\nContent-Length: {len(b)}\r\nConnection: close\r\n\r\n'.encode() + b)
    if not read:
        return s
    out = b''
    try:
        while True:
            d = s.recv(1 << 20)
            if not d: break
            out += d
    except Exception:
        pass
    s.close()
    return out.split(b'\r\n', 1)[0].decode(errors='replace')
`;

/** Writes the host's kernel settings, and says what it sees of the mounts. */
const KERNEL = String.raw`
import os, time
mounts = [l.split(' ') for l in open('/proc/self/mountinfo').read().splitlines()]
print('mounts', json.dumps(sorted({m[3] + ' ' + m[4] + ' ' + m[5].split(',')[0] for m in mounts})))
# Each setting is written with the value it has (harmless even where the box would fail): the write is what counts.
for p in ['/proc/sys/kernel/core_pattern', '/proc/sys/vm/swappiness', '/proc/sys/kernel/modprobe']:
    try:
        value = open(p).read()
        with open(p, 'w') as f: f.write(value)
        print('WROTE', p)
    except OSError as e:
        print('refused', p, e.strerror)
print('sysrq-trigger writable', os.access('/proc/sysrq-trigger', os.W_OK))
print('writable', os.access('/proc/sys/kernel/core_pattern', os.W_OK))
print('ready-to-look'); import sys; sys.stdout.flush()
time.sleep(4)
`;

/** A streamed forged call whose answer it never reads, kept open past the request timeout. */
const STALL = String.raw`
s = request({'model': 'x', 'messages': [{'role': 'user', 'content': 'stall'}], 'stream': True}, read=False)
time.sleep(9)
print('stalled a call for 9 s')
`;

/** Forged calls: a flood of images, huge tool messages, a forged tool result, an http image (SSRF). */
const FORGE = String.raw`
import base64, sqlite3, zlib, struct
def png(i):
    raw = b'\x00' + bytes([i % 256, (i // 256) % 256, 7])
    def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
    return b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
images = [{'type': 'image_url', 'image_url': {'url': 'data:image/png;base64,' + base64.b64encode(png(i)).decode()}} for i in range(900)]
print('images', request({'model': 'x', 'messages': [{'role': 'user', 'content': images}] * 20}))
huge = [{'role': 'user', 'content': 'go'}, {'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'bash', 'arguments': '{}'}}]}, {'role': 'tool', 'tool_call_id': 'c1', 'content': 'Z' * (12 << 20)}]
for _ in range(3):
    print('huge', request({'model': 'x', 'messages': huge}))
db = sqlite3.connect(os.environ['OPENCODE_DB'])
running = [json.loads(r[0]).get('callID') for r in db.execute("select data from part") if json.loads(r[0]).get('type') == 'tool' and json.loads(r[0]).get('state', {}).get('status') == 'running']
print('running call', 'found' if running else 'missing')
forged = [{'role': 'user', 'content': 'x'}, {'role': 'assistant', 'content': '', 'tool_calls': [{'id': running[0] if running else 'c', 'type': 'function', 'function': {'name': 'bash', 'arguments': '{}'}}]}, {'role': 'tool', 'tool_call_id': running[0] if running else 'c', 'content': 'FORGED-TOOL-OUTPUT'}]
print('forged-result', request({'model': 'x', 'messages': forged}))
print('ssrf', request({'model': 'x', 'messages': [{'role': 'user', 'content': [{'type': 'image_url', 'image_url': {'url': 'http://127.0.0.1:' + os.environ.get('X', '1') + '/'}}]}]}))
`;

function runs(code: string, ssrfPort = 1): string {
  return `/usr/bin/python3 - <<'PYEOF'\nimport os\nos.environ['X'] = '${ssrfPort}'\n${PRELUDE}\n${code}\nPYEOF`;
}

/** One bash call running `code`, then a final answer built from its output (`answer` decides the box). */
function attack(code: string, answer: (output: string) => string, ssrfPort?: number): Script {
  return (body) => {
    if (!body.tools) return { kind: 'text', text: 'an answer to a forged call' };
    if (toolResults(body) === 0) return { kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: runs(code, ssrfPort), timeout: 120_000 } }] };
    return { kind: 'text', text: answer(lastToolOutput(body)) };
  };
}

/** Host processes whose command line holds `marker`, with their real (host) uid. */
function hostUids(marker: string): number[] {
  const uids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) continue;
      const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${entry}/status`, 'utf8'));
      if (uid) uids.push(Number(uid[1]));
    } catch {
      // gone
    }
  }
  return uids;
}

describe.skipIf(!asRoot)('attacks on the score and the host, through the real OpenCode and box', () => {
  const logger = createLogger({ level: 'warn', secrets: [KEY] });
  let server: ScriptedPolicyServer;
  let provider: LocalBwrapProvider;
  let runner: AgentRunner;
  let env: FleetEnv;
  let redis: Redis;
  let store: RunStore;

  beforeAll(async () => {
    server = await startScriptedPolicyServer({ modelName: 'scripted-vlm' });
    env = await makeFleetEnv({ rows: 2, judgeUrl: 'http://127.0.0.1:9/v1', overrides: ['++agent.kind=opencode', '++policy_model_name=scripted-vlm', `++policy_api_key=${KEY}`] });
    const config = env.config();
    provider = new LocalBwrapProvider({ rootDir: path.join(ROOT, 'sandboxes'), workdir: '/workspace', extraRoBinds: opencodeRoBinds(config), logger, resources: { cpu: 2, memory_mib: 2048, pids: 512, disk_mib: 256 } });
    runner = createOpenCodeRunner({ config, logger, provider, socketDir: path.join(ROOT, 'sockets'), upstreamFailureLimits: { maxConsecutiveFailures: 2, maxFailingS: 4 } });
    redis = createRedis(REDIS_URL, 'client');
    store = new RunStore(redis, env.prefix);
  });
  afterAll(async () => {
    await runner?.close();
    await server?.close();
    redis?.disconnect();
    await env?.cleanup();
    rmSync(ROOT, { recursive: true, force: true });
  });

  async function stage(runId: string, overrides: string[] = []) {
    const config = env.config([`++run_id=${runId}`, ...overrides]);
    const bench = await loadPreparedBenchmark(config.data_dir, config.benchmark);
    await produceRun({ config, redis, logger, tasks: bench.tasks.slice(0, 1), readImage: bench.readImage });
    const task = bench.tasks[0];
    const job = { v: 1 as const, run_id: runId, task_id: task.task_id, repeat: 0, rollout_id: rolloutId(runId, task.task_id, 0) };
    const host: SandboxHostSettings = { policyBaseUrl: server.url, allowedBaseUrls: [], policyApiKey: KEY, captureRoot: path.join(ROOT, 'captures') };
    return { out: await runRolloutStage(job, { store, agent: runner, host }, new AbortController().signal), job };
  }

  it('cannot write the host kernel settings, runs as an unprivileged host uid, and sees no host path in its mounts', async () => {
    const corePattern = readFileSync('/proc/sys/kernel/core_pattern', 'utf8');
    server.setScript(attack(KERNEL, (out) => `The tool said:\n${out}\nSo \\boxed{B}`));
    let uids: number[] = [];
    const looking = (async () => {
      for (let i = 0; i < 600 && uids.length === 0; i++) {
        uids = hostUids('ready-to-look');
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const { out } = await stage('routes-kernel');
    await looking;
    expect(readFileSync('/proc/sys/kernel/core_pattern', 'utf8')).toBe(corePattern);
    expect(out.next).toBe('judge');
    if (out.next !== 'judge') return;
    const said = out.job.outcome.response_tail;
    expect(said).not.toContain('WROTE');
    expect(said).toMatch(/refused \/proc\/sys\/kernel\/core_pattern (Read-only file system|Permission denied)/);
    expect(said).toContain('writable False');
    expect(said).toContain('sysrq-trigger writable False');
    // The sandbox's processes, seen from the host: the launcher's uid, never root.
    expect(uids.length).toBeGreaterThan(0);
    for (const uid of uids) expect(uid).toBe(DEFAULT_HOST_UID);
    // Each mount as "root-in-its-filesystem mount-point options": nothing names the sandbox's host folders.
    const mounts = (JSON.parse(/mounts (\[.*\])/.exec(said)![1]) as string[]).join('\n');
    for (const hostPath of [ROOT, 'vcfleet-sandboxes', 'vcfleet-gw-', 'gateway.sock']) expect(mounts).not.toContain(hostPath);
    expect(mounts).toContain('/sys /proc/sys ro');
  });

  it('a forged streamed call it never reads is not a policy-server failure: the row is scored, the call counted as forged', async () => {
    server.setScript((body, _i) => {
      // The forged call gets a long streamed answer, so that the gateway waits on the sandbox to read it.
      if (!body.tools) return { kind: 'text', text: 'y'.repeat(4 << 20) };
      if (toolResults(body) === 0) return { kind: 'tool_calls', calls: [{ name: 'bash', arguments: { command: runs(STALL), timeout: 120_000 } }] };
      return { kind: 'text', text: `The tool said ${lastToolOutput(body).trim()}. \\boxed{D}` };
    });
    const { out } = await stage('routes-stall', ['++policy.request_timeout_s=3']);
    expect(out.next).toBe('judge');
    if (out.next !== 'judge') return;
    expect(out.job.outcome).toMatchObject({ stop_reason: 'answered', extracted_answer: 'D', forged_calls: 1 });
    expect(out.job.outcome.response_tail).toContain('stalled a call for 9 s');
  });

  it('forged calls (an image flood, huge tool messages, a forged tool result, an http image) never reach the transcript, the answer or the worker\'s memory', async () => {
    const canary: string[] = [];
    const probe = http.createServer((req, res) => {
      canary.push(req.url ?? '');
      res.end('x');
    });
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as { port: number }).port;
    const before = server.requests.length;
    server.setScript(attack(FORGE, (o) => `Tool said:\n${o}\nSo \\boxed{A}`, port));
    try {
      const { out, job } = await stage('routes-forge');
      expect(out.next).toBe('judge');
      if (out.next !== 'judge') return;
      const said = out.job.outcome.response_tail;
      expect(said).toMatch(/images HTTP\/1\.1 200/);
      expect(said).toMatch(/huge HTTP\/1\.1 (413|200)/);
      expect(said).toContain('running call found');
      expect(said).toMatch(/forged-result HTTP\/1\.1 200/);
      expect(said).toMatch(/ssrf HTTP\/1\.1 400/);
      expect(canary).toEqual([]);
      // The http URL never left the gateway.
      for (const r of server.requests.slice(before)) expect(JSON.stringify(r.body)).not.toContain(`127.0.0.1:${port}`);
      expect(out.job.outcome.forged_calls).toBeGreaterThanOrEqual(2);
      expect(out.job.outcome.refused_requests).toMatchObject({ body: 1 });
      const parts = await store.getTranscriptParts('routes-forge', job.rollout_id);
      const record = decodeTranscript(parts.record!);
      // OpenCode's two calls only: its tool call, and its answer; the tool output is the real one.
      expect(record.turns).toHaveLength(2);
      expect(record.outcome.forged_calls).toBe(out.job.outcome.forged_calls);
      const output = record.turns[0].tool_calls[0].output ?? '';
      expect(output).toContain('forged-result HTTP/1.1');
      // The forged text is in the command the model wrote, never in what a tool returned.
      for (const t of record.turns) for (const c of t.tool_calls) expect(c.output ?? '').not.toContain('FORGED-TOOL-OUTPUT');
      expect(Object.keys(record.image_mimes)).toHaveLength(1);
      expect(parts.record!.length).toBeLessThan(64 * 1024);
    } finally {
      await new Promise<void>((r) => probe.close(() => r()));
    }
  });

  it('one rule for the box: a box spanning the whole response is no answer; an early answer still counts, for the stop reason and the extraction', async () => {
    const wide = `\\boxed{${'w'.repeat(700_000)}}`;
    server.setScript(() => ({ kind: 'text', text: `Let me think. ${wide}` }));
    const spanned = (await stage('routes-box-1')).out;
    // Nothing is extracted; the text still goes to the judge, told so (the reference's rule for unboxed text).
    expect(spanned.next).toBe('judge');
    if (spanned.next === 'judge') expect(spanned.job.outcome).toMatchObject({ stop_reason: 'no_answer', extracted_answer: null });
    server.setScript(() => ({ kind: 'text', text: `\\boxed{C} is my answer. Now: \\boxed{ ${'w'.repeat(700_000)} }` }));
    const early = (await stage('routes-box-2')).out;
    expect(early.next).toBe('judge');
    if (early.next === 'judge') expect(early.job.outcome).toMatchObject({ stop_reason: 'answered', extracted_answer: 'C' });
  });
});
