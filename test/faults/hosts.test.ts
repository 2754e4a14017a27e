/**
 * The fleet as docs/operate.md's "Many hosts against one Redis" sets it up, with every host a set of Linux
 * namespaces on one private network (host-namespaces.ts): Redis (AOF, a password, protected mode
 * left on), a models host (the scripted policy and judge servers bound to its address), and hosts
 * for the producer, two sandbox-workers (real OpenCode in bubblewrap sandboxes), a judge-worker and
 * the results consumer, each with its own host name, /tmp, HOME and working folder, and the code
 * read-only. No disk is shared: the producer prepares the parquet on its own disk, the rows and
 * transcripts land on the results host only. Mid-run a sandbox-worker is SIGKILLed while its model's
 * tool runs, and a fresh one starts on a new host: still one row per rollout, the scripted scores.
 * Skipped (with the reason) where namespaces cannot be made.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it, onTestFailed } from 'vitest';
import type { Row } from '../../src/shared/records/rows.ts';
import type { RunStatus } from '../../src/ops/run-status.ts';
import { FAKE_JUDGE_KEY, FAKE_POLICY_KEY, waitFor } from '../helpers/fleet.ts';
import { writeFixtureParquet, type Fixture } from '../helpers/fixture-parquet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { countLines, descendants, expectOneRowEach, readJsonl, readTree, stillAlive } from './fault-helpers.ts';
import {
  createLab, listNamespaces, namespaceSupport, PRIVATE_WORK, rootLinks, sandboxCgroupsOf,
  type Lab, type LabHost, type LabProcess,
} from './host-namespaces.ts';

const RUN = 'hosts';
const VCFLEET = path.resolve(import.meta.dirname, '../../bin/vcfleet.js');
const SUPPORT = namespaceSupport();
if (SUPPORT) console.log(`[hosts] skipped: ${SUPPORT}`);

interface Planned {
  /** What the scripted model boxes; null: it answers without a box. */
  answer: string | null;
  reward: 0 | 1;
  stop: 'answered' | 'no_answer';
}

/** Per task: the gold answer (reward 1), a wrong one (0) for the third, no `\boxed{}` (0, no judge call) for the fifth. */
function plan(fixture: Fixture): Map<string, Planned> {
  const wrong = (gold: string) => (/^\d+$/.test(gold) ? String(Number(gold) + 1) : gold === 'A' ? 'B' : 'A');
  return new Map(fixture.expected.map((t, i): [string, Planned] => {
    if (i === 2) return [t.task_id, { answer: wrong(t.gold), reward: 0, stop: 'answered' }];
    if (i === 4) return [t.task_id, { answer: null, reward: 0, stop: 'no_answer' }];
    return [t.task_id, { answer: t.gold, reward: 1, stop: 'answered' }];
  }));
}

interface Backends {
  redis: LabHost;
  password: string;
  /** What the scripted models listen on: base URLs ending in /v1. */
  urls: { policy: string; judge: string };
  /** `redis-cli` against the lab's Redis from `from`'s network namespace (stdout and stderr). */
  redisCli(from: LabHost, ...args: string[]): string;
}

/**
 * Redis on a host of its own (AOF, no eviction, a password; protected mode stays on, which admits
 * other hosts once a password is set), checked from `client`'s host; then the models host.
 */
async function startBackends(l: Lab, redis: LabHost, models: LabHost, client: LabHost, answers: Record<string, string | null>): Promise<Backends> {
  const password = randomBytes(12).toString('hex');
  l.start(redis, ['redis-server', '--port', '6379', '--bind', redis.addr, '--requirepass', password, '--appendonly', 'yes',
    '--appendfsync', 'everysec', '--maxmemory-policy', 'noeviction', '--save', '', '--dir', redis.work]);
  const redisCli = (from: LabHost, ...args: string[]) => {
    const r = spawnSync('nsenter', [`--net=/run/netns/${from.ns}`, 'redis-cli', '-h', redis.addr, '-a', password, '--no-auth-warning', ...args], { encoding: 'utf8' });
    return `${r.stdout}${r.stderr}`.trim();
  };
  await waitFor('Redis to answer another host', () => redisCli(client, 'ping') === 'PONG', 20_000, 100);
  const noPassword = spawnSync('nsenter', [`--net=/run/netns/${client.ns}`, 'redis-cli', '-h', redis.addr, 'ping'], { encoding: 'utf8' });
  expect(noPassword.stdout + noPassword.stderr).toMatch(/NOAUTH/);

  const p = l.start(models, [process.execPath, 'bin/run-ts.js', 'test/faults/hosts-models.ts'],
    { env: { MODELS_HOST: models.addr, MODELS_ANSWERS: JSON.stringify(answers), MODELS_SLEEP_S: '5' } });
  const urls = await waitFor('the models host to listen', () => {
    const lines = p.stdout().split('\n');
    return lines.length > 1 && (JSON.parse(lines[0]) as Backends['urls']);
  }, 60_000, 100);
  return { redis, password, urls, redisCli };
}

/** SIGKILL a sandbox-worker while its model's bash tool sleeps in a sandbox; returns the rollout it was running. */
async function killMidTool(p: LabProcess): Promise<string> {
  await waitFor(`${p.host.role} running a tool`, () => descendants(p.child.pid!).some((d) => /^sleep \d/.test(d.cmd)), 180_000, 100);
  const tree = descendants(p.child.pid!);
  const rollout = tree.map((d) => new RegExp(`vcfleet-sandboxes/(${RUN}-bv-\\d{3}-\\d+)-`).exec(d.cmd)?.[1]).find(Boolean);
  expect(rollout, tree.map((d) => d.cmd).join('\n')).toBeDefined();
  expect(tree.some((d) => d.cmd.includes('bwrap')) && tree.some((d) => /opencode/.test(d.cmd))).toBe(true);
  p.child.kill('SIGKILL');
  await p.exited;
  // bwrap dies with its parent and takes OpenCode and the tool with it.
  await waitFor(`${p.host.role}'s sandbox to die with it`, () => stillAlive(tree).length === 0, 10_000, 100);
  return rollout!;
}

/** The run's outputs under `dir`: its JSONL, its metrics file, its `_transcripts/` folder. */
function outputsUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of existsSync(d) ? readdirSync(d) : []) {
      const file = path.join(d, name);
      const st = statSync(file, { throwIfNoEntry: false });
      if (st?.isDirectory()) {
        if (name === `${RUN}_transcripts`) out.push(file);
        else walk(file);
      } else if (name.startsWith(`${RUN}.`) || name.startsWith(`${RUN}_`)) out.push(file);
    }
  };
  walk(dir);
  return out;
}

/** The rollout ids a sandbox-worker logged as done. */
function rolloutsDone(p: LabProcess): string[] {
  return p.output().split('\n').filter((l) => l.includes('"rollout done"')).map((l) => (JSON.parse(l) as { rollout_id: string }).rollout_id);
}

/** `vcfleet status --json` on `host`, once it says the run is complete. */
async function completeStatus(l: Lab, host: LabHost, env: Record<string, string>): Promise<RunStatus> {
  return waitFor('status: complete', async () => {
    const p = l.start(host, [process.execPath, VCFLEET, 'status', '--run-id', RUN, '--json'], { private: true, env });
    expect(await p.exited, p.output()).toBe(0);
    const s = JSON.parse(p.stdout()) as RunStatus;
    return s.complete && s;
  }, 60_000, 500);
}

/** Each host knows its own subnet only (no default route, so nothing leaves the lab); the switch routes nothing. */
function expectIsolated(l: Lab): void {
  const routes = (ns: string) => (JSON.parse(execFileSync('ip', ['-n', ns, '-j', 'route', 'show']).toString()) as Array<{ dst: string }>).map((r) => r.dst);
  for (const h of l.hosts) expect(routes(h.ns), h.ns).toEqual([`${l.subnet}.0/24`]);
  expect(routes(l.switchNs)).toEqual([]);
}

// Runs wherever the test can make network namespaces (root, iproute2), as on CI; elsewhere skipped, saying why.
describe.skipIf(SUPPORT !== null)(`the fleet across hosts made of network namespaces${SUPPORT ? ` (skipped: ${SUPPORT})` : ''}`, () => {
  const labs: Lab[] = [];
  /** A lab of this file, removed after it even when a test fails half-way. */
  const newLab = () => {
    const l = createLab(createTmpDir('vcfleet-hosts-'));
    labs.push(l);
    return l;
  };
  afterAll(async () => {
    for (const l of labs) await l.cleanup();
    removeTmpDirs();
  });

  it('produce, two sandbox-workers, a judge-worker and a results host on hosts of their own; a sandbox-worker SIGKILLed mid-tool, a fresh one on a new host', async () => {
    const linksBefore = rootLinks();
    const l = newLab();
    onTestFailed(() => {
      for (const p of l.processes) console.log(`[hosts] --- ${p.host.role} (${p.child.spawnargs.slice(-4).join(' ')}) exit ${p.child.exitCode ?? p.child.signalCode}\n${p.output().slice(-4000)}`);
    });
    try {
      const [redisHost, modelsHost, producer, sb1Host, sb2Host, judgeHost, resultsHost] =
        ['redis', 'models', 'producer', 'sandbox-1', 'sandbox-2', 'judge', 'results'].map((r) => l.addHost(r));
      const fixture = writeFixtureParquet(path.join(producer.work, 'babyvision.parquet'), { rows: 6 });
      const answers = plan(fixture);
      const byQuestion = Object.fromEntries(fixture.expected.map((t) => [`${t.question.split(':')[0]}:`, answers.get(t.task_id)!.answer]));
      const { password, urls, redisCli } = await startBackends(l, redisHost, modelsHost, producer, byQuestion);

      const common = { REDIS_URL: `redis://:${password}@${redisHost.addr}:6379`, VCFLEET_PREFIX: `vcfhosts-${l.tag}`, VCFLEET_LOG_JSON: '1' };
      const vcfleet = (host: LabHost, args: string[], env: Record<string, string> = {}) =>
        l.start(host, [process.execPath, VCFLEET, ...args], { private: true, env: { ...common, ...env } });
      const sandboxWorker = (host: LabHost) => vcfleet(host, ['worker', 'sandbox', '++agent.kind=opencode', '++queues.rollout_concurrency=1',
        '++queues.lock_duration_ms=5000'], { POLICY_BASE_URL: urls.policy, POLICY_API_KEY: FAKE_POLICY_KEY });
      const sb1 = sandboxWorker(sb1Host);
      const sb2 = sandboxWorker(sb2Host);
      const judge = vcfleet(judgeHost, ['worker', 'judge'], { JUDGE_BASE_URL: urls.judge, OPENAI_API_KEY: FAKE_JUDGE_KEY });
      const results = vcfleet(resultsHost, ['worker', 'results']);
      // The run's settings (policy model, limits) are the producer's; its preflight checks that Redis persists.
      const produce = vcfleet(producer, ['produce', '--run-id', RUN, `++babyvision_parquet=${PRIVATE_WORK}/babyvision.parquet`,
        `++babyvision.sha256=${fixture.sha256}`, '++preflight.require_redis_persistence=true', '++task_timeout_s=150',
        '++policy.context_window=64000', '++policy.max_output_tokens=2048'], { POLICY_MODEL: 'scripted-vlm' });
      expect(await produce.exited, produce.output()).toBe(0);
      expect(produce.stdout()).toContain(`run ${RUN}: 6 rollouts, 6 enqueued now`);

      const killed = await killMidTool(sb1);
      const sb3Host = l.addHost('sandbox-3');
      const sb3 = sandboxWorker(sb3Host);

      const output = path.join(resultsHost.work, 'results', `${RUN}.jsonl`);
      await waitFor('6 rows on the results host', () => countLines(output) >= 6, 240_000, 250);
      const rows = readJsonl(output);
      expectOneRowEach(rows, RUN, fixture);
      const got = Object.fromEntries(rows.map((r: Row) => [r.task_id, { reward: r.reward, stop: r.stop_reason, failure: r.failure_kind }]));
      const want = Object.fromEntries([...answers].map(([id, a]) => [id, { reward: a.reward, stop: a.stop, failure: null }]));
      expect(got).toEqual(want);
      expect(rows.every((r) => r.tool_calls === 1 && r.policy_model === 'scripted-vlm')).toBe(true);

      // The killed rollout ran again on a live worker; the fresh host took work too.
      const done = { sb1: rolloutsDone(sb1), sb2: rolloutsDone(sb2), sb3: rolloutsDone(sb3) };
      console.log(`[hosts] killed ${killed} on sandbox-1; rollouts done: ${JSON.stringify(done)}`);
      expect(done.sb1).not.toContain(killed);
      expect([...done.sb2, ...done.sb3]).toContain(killed);
      expect(done.sb3.length).toBeGreaterThan(0);

      // The outputs are on the results host only; only the producer prepared the benchmark (workers read it from Redis).
      const transcripts = path.join(resultsHost.work, 'results', `${RUN}_transcripts`);
      expect(readdirSync(transcripts).filter((n) => n.endsWith('.json')).sort()).toEqual(rows.map((r) => `${r.rollout_id}.json`).sort());
      expect(outputsUnder(resultsHost.dir).map((f) => path.basename(f)).sort()).toEqual([`${RUN}.jsonl`, `${RUN}_fleet_metrics.json`, `${RUN}_transcripts`]);
      for (const h of [producer, sb1Host, sb2Host, sb3Host, judgeHost, modelsHost]) expect(outputsUnder(h.dir), h.role).toEqual([]);
      expect(existsSync(path.join(producer.work, 'data', 'babyvision_opencode', 'tasks.jsonl'))).toBe(true);
      for (const h of [sb1Host, sb2Host, sb3Host, judgeHost, resultsHost]) expect(existsSync(path.join(h.work, 'data')), h.role).toBe(false);
      // A host sees the code read-only, its own name and its own /tmp.
      const inHost = (script: string) => spawnSync('nsenter', ['-t', String(sb2.child.pid), '-m', '-u', 'sh', '-c', script], { encoding: 'utf8' });
      expect(inHost(`touch ${path.join(import.meta.dirname, 'hosts-ro-probe')}`).stderr).toMatch(/Read-only file system/);
      expect(inHost('hostname; findmnt -n -o FSTYPE /tmp').stdout).toBe('sandbox-2\ntmpfs\n');

      // `vcfleet status` on the producer host agrees with the rows, and sees the workers on their hosts.
      const status = await completeStatus(l, producer, common);
      const stops: Record<string, number> = {};
      for (const r of rows) stops[String(r.stop_reason)] = (stops[String(r.stop_reason)] ?? 0) + 1;
      expect(status).toMatchObject({ rows: 6, scored: 6, correct: rows.filter((r) => r.reward === 1).length, masked: {}, stop_reasons: stops, pending: 0 });
      const live = status.workers.live.map((w) => `${w.role}@${w.host}`);
      expect(live).toEqual(expect.arrayContaining(['judge@judge', 'results@results', 'sandbox@sandbox-2', 'sandbox@sandbox-3']));
      expect(live.filter((w) => !['judge@judge', 'results@results', 'sandbox@sandbox-1', 'sandbox@sandbox-2', 'sandbox@sandbox-3'].includes(w))).toEqual([]);

      // Every Redis client is a host of this lab, and nothing can route out of it; Redis kept an AOF.
      const clients = redisCli(redisHost, 'client', 'list').split('\n').map((c) => /addr=([\d.]+):/.exec(c)?.[1]);
      expect(clients.length).toBeGreaterThan(3);
      for (const a of clients) expect(l.hosts.map((h) => h.addr)).toContain(a);
      expectIsolated(l);
      expect(redisCli(redisHost, 'info', 'persistence')).toMatch(/aof_enabled:1/);

      // Every worker stops cleanly; no key or password in any output or file.
      const workers = [sb2, sb3, judge, results];
      for (const p of workers) p.child.kill('SIGTERM');
      expect(await Promise.all(workers.map((p) => p.exited))).toEqual([0, 0, 0, 0]);
      const texts = [...l.processes.map((p) => ({ where: p.host.role, text: p.output() })), ...readTree(resultsHost.work).map((f) => ({ where: f.file, text: f.text }))];
      for (const { where, text } of texts) {
        for (const key of [FAKE_POLICY_KEY, FAKE_JUDGE_KEY, password]) expect(text.includes(key), `a secret in ${where}`).toBe(false);
      }

      // Nothing left behind: sandbox cgroups, processes, namespaces, interfaces.
      expect(sandboxCgroupsOf([sb1, sb2, sb3].map((p) => p.child.pid!))).toEqual([]);
      expect(await l.cleanup()).toEqual([]);
      expect(listNamespaces().filter((n) => n.includes(l.tag))).toEqual([]);
      expect(rootLinks().sort()).toEqual(linksBefore.sort());
    } finally {
      await l.cleanup();
    }
  });
  // Redis in protected mode writes "-DENIED ... protected mode" on accept and closes; ioredis writes
  // its first command into the closed socket and sees only EPIPE. The roles read the greeting on a
  // plain socket and say "give it a password", not "check the firewall".
  it('a Redis in protected mode (no password) is reported as protected mode to a role on another host', async () => {
    const l = newLab();
    try {
      const [redisHost, other] = ['redis', 'other'].map((r) => l.addHost(r));
      l.start(redisHost, ['redis-server', '--port', '6379', '--bind', redisHost.addr, '--save', '', '--appendonly', 'yes', '--dir', redisHost.work]);
      const ping = () => spawnSync('nsenter', [`--net=/run/netns/${other.ns}`, 'redis-cli', '-h', redisHost.addr, 'ping'], { encoding: 'utf8' }).stdout;
      await waitFor('Redis to answer (DENIED) from another host', () => /DENIED/.test(ping()), 20_000, 100);
      const env = { REDIS_URL: `redis://${redisHost.addr}:6379`, VCFLEET_LOG_JSON: '1', OPENAI_API_KEY: FAKE_JUDGE_KEY };
      for (const args of [['worker', 'judge'], ['status', '--run-id', RUN]]) {
        const p = l.start(other, [process.execPath, VCFLEET, ...args, '++redis.connect_timeout_s=3', '++preflight.enabled=false'], { private: true, env });
        expect(await p.exited, p.output()).not.toBe(0);
        expect(p.output()).toContain(`cannot reach Redis at redis://${redisHost.addr}:6379`);
        expect(p.output()).toMatch(/DENIED.*give it a password/);
      }
    } finally {
      await l.cleanup();
    }
  });
});
