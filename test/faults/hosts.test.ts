/**
 * The fleet as README's "Many hosts against one Redis" sets it up, with every host a set of Linux
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
import type { Row } from '../../src/shared/rows.ts';
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
const SUPPORT = namespaceSupport();
if (SUPPORT) console.log(`[hosts] skipped: ${SUPPORT}`);

/** What the scripted model answers per task: the gold, a wrong answer, or no `\boxed{}` at all. */
interface Planned {
  answer: string | null;
  reward: 0 | 1;
  stop: 'answered' | 'no_answer';
}

function plan(fixture: Fixture): Map<string, Planned> {
  const wrong = (gold: string) => (/^\d+$/.test(gold) ? String(Number(gold) + 1) : gold === 'A' ? 'B' : 'A');
  return new Map(fixture.expected.map((t, i): [string, Planned] => {
    if (i === 2) return [t.task_id, { answer: wrong(t.gold), reward: 0, stop: 'answered' }];
    if (i === 4) return [t.task_id, { answer: null, reward: 0, stop: 'no_answer' }];
    return [t.task_id, { answer: t.gold, reward: 1, stop: 'answered' }];
  }));
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
  return p.output().split('\n').filter((l) => l.includes('"rollout done"')).map((l) => (JSON.parse(l) as { rollout: string }).rollout);
}

describe('the fleet across hosts made of network namespaces', () => {
  if (SUPPORT) {
    it.skip(`skipped: ${SUPPORT}`, () => {});
    return;
  }
  let lab: Lab | undefined;
  afterAll(async () => {
    await lab?.cleanup();
    removeTmpDirs();
  });

  it('produce, two sandbox-workers, a judge-worker and a results host on hosts of their own; a sandbox-worker SIGKILLed mid-tool, a fresh one on a new host', async () => {
    const base = createTmpDir('vcfleet-hosts-');
    const linksBefore = rootLinks();
    lab = await createLab(base);
    const l = lab;
    onTestFailed(() => {
      for (const p of l.processes) console.log(`[hosts] --- ${p.host.role} (${p.child.spawnargs.slice(-4).join(' ')}) exit ${p.child.exitCode ?? p.child.signalCode}\n${p.output().slice(-4000)}`);
    });
    try {
      const password = randomBytes(12).toString('hex');
      const prefix = `vcfhosts-${l.tag}`;
      const [redisHost, modelsHost, producer, sb1Host, sb2Host, judgeHost, resultsHost] = await Promise.all(
        ['redis', 'models', 'producer', 'sandbox-1', 'sandbox-2', 'judge', 'results'].map((r) => l.addHost(r)),
      );

      // Redis on its own host: AOF, no eviction, a password; protected mode stays on (it admits other hosts once a password is set).
      l.start(redisHost, ['redis-server', '--port', '6379', '--bind', redisHost.addr, '--requirepass', password, '--appendonly', 'yes',
        '--appendfsync', 'everysec', '--maxmemory-policy', 'noeviction', '--save', '', '--dir', redisHost.work]);
      const cli = (from: LabHost, ...args: string[]) => {
        const r = spawnSync('nsenter', [`--net=/run/netns/${from.ns}`, 'redis-cli', '-h', redisHost.addr, ...args], { encoding: 'utf8' });
        return `${r.stdout}${r.stderr}`.trim();
      };
      const auth = ['-a', password, '--no-auth-warning'];
      await waitFor('Redis to answer the producer host', () => cli(producer, ...auth, 'ping') === 'PONG', 20_000, 100);
      expect(cli(producer, 'ping')).toMatch(/NOAUTH/);

      const fixture = writeFixtureParquet(path.join(producer.work, 'babyvision.parquet'), { rows: 6 });
      const answers = plan(fixture);
      const byQuestion = Object.fromEntries(fixture.expected.map((t) => [`${t.question.split(':')[0]}:`, answers.get(t.task_id)!.answer]));
      const models = l.start(modelsHost, [process.execPath, 'bin/run-ts.js', 'test/faults/hosts-models.ts'],
        { env: { MODELS_HOST: modelsHost.addr, MODELS_ANSWERS: JSON.stringify(byQuestion), MODELS_SLEEP_S: '5' } });
      const urls = await waitFor('the models host', () => {
        const line = models.stdout().split('\n')[0];
        return models.stdout().includes('\n') ? (JSON.parse(line) as { policy: string; judge: string }) : false;
      }, 60_000, 100);

      const common = { REDIS_URL: `redis://:${password}@${redisHost.addr}:6379`, VCFLEET_PREFIX: prefix, VCFLEET_LOG_JSON: '1' };
      const sandboxEnv = { ...common, POLICY_BASE_URL: urls.policy, POLICY_API_KEY: FAKE_POLICY_KEY };
      const sandboxArgs = ['worker', 'sandbox', '++agent.kind=opencode', '++queues.rollout_concurrency=1', '++queues.lock_duration_ms=5000'];
      const vcfleet = (host: LabHost, args: string[], env: Record<string, string>) =>
        l.start(host, [process.execPath, path.resolve(import.meta.dirname, '../../bin/vcfleet.js'), ...args], { private: true, env });

      const sb1 = vcfleet(sb1Host, sandboxArgs, sandboxEnv);
      const sb2 = vcfleet(sb2Host, sandboxArgs, sandboxEnv);
      const judge = vcfleet(judgeHost, ['worker', 'judge'], { ...common, JUDGE_BASE_URL: urls.judge, OPENAI_API_KEY: FAKE_JUDGE_KEY });
      const results = vcfleet(resultsHost, ['worker', 'results'], common);
      // The run's settings (policy model, limits) are the producer's; its preflight checks that Redis persists.
      const produce = vcfleet(producer, ['produce', '--run-id', RUN, `++babyvision_parquet=${PRIVATE_WORK}/babyvision.parquet`,
        `++babyvision.sha256=${fixture.sha256}`, '++preflight.require_redis_persistence=true', '++task_timeout_s=150',
        '++policy.context_window=64000', '++policy.max_output_tokens=2048'], { ...common, POLICY_MODEL: 'scripted-vlm' });
      expect(await produce.exited, produce.output()).toBe(0);
      expect(produce.stdout()).toContain(`run ${RUN}: 6 rollouts, 6 enqueued now`);
      expect(existsSync(path.join(producer.work, 'data', 'babyvision_opencode', 'tasks.jsonl'))).toBe(true);

      // SIGKILL sandbox-1 while the model's bash tool sleeps inside OpenCode's sandbox.
      const sleeping = await waitFor('sandbox-1 running a tool', () => descendants(sb1.child.pid!).find((p) => /^sleep \d/.test(p.cmd)), 180_000, 100);
      const tree = descendants(sb1.child.pid!);
      const killed = tree.map((p) => /vcfleet-sandboxes\/(hosts-bv-\d{3}-\d+)-/.exec(p.cmd)?.[1]).find(Boolean);
      expect(killed, tree.map((p) => p.cmd).join('\n')).toBeDefined();
      expect(tree.some((p) => p.cmd.includes('bwrap')) && tree.some((p) => /opencode/.test(p.cmd)), `${sleeping.cmd}`).toBe(true);
      sb1.child.kill('SIGKILL');
      await sb1.exited;
      await waitFor('sandbox-1\'s sandbox to die with it', () => stillAlive(tree).length === 0, 10_000, 100);
      const sb3Host = await l.addHost('sandbox-3');
      const sb3 = vcfleet(sb3Host, sandboxArgs, sandboxEnv);

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

      // Transcripts on the results host only; nothing of the output on any other host.
      const transcripts = path.join(resultsHost.work, 'results', `${RUN}_transcripts`);
      expect(readdirSync(transcripts).filter((n) => n.endsWith('.json')).sort()).toEqual(rows.map((r) => `${r.rollout_id}.json`).sort());
      expect(outputsUnder(resultsHost.dir).map((f) => path.basename(f)).sort()).toEqual([`${RUN}.jsonl`, `${RUN}_aggregate_metrics.json`, `${RUN}_transcripts`]);
      for (const h of [producer, sb1Host, sb2Host, sb3Host, judgeHost, modelsHost]) expect(outputsUnder(h.dir), h.role).toEqual([]);
      // Only the producer prepared the benchmark: the workers read tasks and images from Redis.
      for (const h of [sb1Host, sb2Host, sb3Host, judgeHost, resultsHost]) expect(existsSync(path.join(h.work, 'data')), h.role).toBe(false);
      // A host sees the code read-only, and its own /tmp.
      const inHost = (p: LabProcess, script: string) =>
        spawnSync('nsenter', ['-t', String(p.child.pid), '-m', '-u', 'sh', '-c', script], { encoding: 'utf8' });
      expect(inHost(sb2, `touch ${path.resolve(import.meta.dirname, 'hosts-ro-probe')}`).stderr).toMatch(/Read-only file system/);
      expect(inHost(sb2, 'hostname; findmnt -n -o FSTYPE /tmp').stdout.split('\n')).toEqual(['sandbox-2', 'tmpfs', '']);

      // `vcfleet status` on the producer host agrees with the rows.
      const status = await waitFor('status: complete', async () => {
        const p = vcfleet(producer, ['status', '--run-id', RUN, '--json'], common);
        expect(await p.exited, p.output()).toBe(0);
        const s = JSON.parse(p.stdout()) as RunStatus;
        return s.complete ? s : false;
      }, 60_000, 500);
      const stops: Record<string, number> = {};
      for (const r of rows) stops[String(r.stop_reason)] = (stops[String(r.stop_reason)] ?? 0) + 1;
      expect(status).toMatchObject({
        rows: 6, scored: 6, correct: rows.filter((r) => r.reward === 1).length, masked: {}, stop_reasons: stops, pending: 0,
      });
      const hostsOf = (s: RunStatus) => [...new Set(s.workers.live.map((w) => `${w.role}@${w.host}`))].sort();
      expect(hostsOf(status)).toEqual(expect.arrayContaining(['judge@judge', 'results@results', 'sandbox@sandbox-2', 'sandbox@sandbox-3']));
      expect(status.workers.live.every((w) => ['sandbox-1', 'sandbox-2', 'sandbox-3', 'judge', 'results'].includes(w.host))).toBe(true);

      // Every Redis client came from a host of this lab; Redis kept its AOF.
      const clients = cli(redisHost, ...auth, 'client', 'list').split('\n').map((c) => /addr=([\d.]+):/.exec(c)?.[1]);
      expect(clients.length).toBeGreaterThan(3);
      for (const a of clients) expect(l.hosts.map((h) => h.addr)).toContain(a);
      expect(cli(redisHost, ...auth, 'info', 'persistence')).toMatch(/aof_enabled:1/);

      // Traffic stays in the lab: hosts know their own subnet only, the switch has no address.
      const routes = (ns: string) => (JSON.parse(execFileSync('ip', ['-n', ns, '-j', 'route', 'show']).toString()) as Array<{ dst: string }>).map((r) => r.dst);
      for (const h of l.hosts) expect(routes(h.ns), h.ns).toEqual([`${l.subnet}.0/24`]);
      expect(routes(l.switchNs)).toEqual([]);

      // Every worker stops cleanly; no key in any output.
      const workers = [sb2, sb3, judge, results];
      for (const p of workers) p.child.kill('SIGTERM');
      expect(await Promise.all(workers.map((p) => p.exited))).toEqual([0, 0, 0, 0]);
      const files = readTree(resultsHost.work);
      for (const { where, text } of [...l.processes.map((p) => ({ where: p.host.role, text: p.output() })), ...files.map((f) => ({ where: f.file, text: f.text }))]) {
        for (const key of [FAKE_POLICY_KEY, FAKE_JUDGE_KEY, password]) expect(text.includes(key), `a secret in ${where}`).toBe(false);
      }

      const workerPids = [sb1, sb2, sb3].map((p) => p.child.pid!);
      expect(sandboxCgroupsOf(workerPids)).toEqual([]);
      expect(await l.cleanup()).toEqual([]);
      expect(listNamespaces().filter((n) => n.includes(l.tag))).toEqual([]);
      expect(rootLinks().sort()).toEqual(linksBefore.sort());
    } finally {
      await l.cleanup();
    }
  });
});
