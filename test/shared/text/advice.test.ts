/**
 * Every piece of advice a run ends with, followed exactly as printed: the commands are taken from
 * the CLI's own output and run as they are written (the settings come from a config file named by
 * VCFLEET_CONFIG, as a user's would, so nothing is added to the command line), and the rows must
 * change as the advice promises. For `vcfleet run` with a REDIS_URL and without one (its private
 * Redis), for `produce`, for `--no-wait`, and with live workers serving the run.
 */
import { writeFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { useScriptedJudge } from '../../helpers/scripted-judge-server.ts';
import { CLI, makeFleetEnv, pasteInShell, REDIS_URL, runCli, startCli, type CliProcess, type FleetEnv } from '../../helpers/fleet.ts';
import { createRedis } from '../../../src/shared/redis/connect.ts';
import { listWorkers } from '../../../src/shared/queue/worker-registry.ts';
import { removeTmpDirs } from '../../helpers/tmp.ts';
import { waitFor } from '../../helpers/wait.ts';
import type { Row } from '../../../src/shared/records/rows.ts';

/** The `++key=value` overrides as the config file a user would write (dotted keys nest). */
function configFile(env: FleetEnv, file: string, drop: string[] = []): string {
  const doc: Record<string, unknown> = {};
  for (const o of env.overrides) {
    const [key, ...rest] = o.slice(2).split('=');
    if (drop.includes(key)) continue;
    const raw = rest.join('=');
    const value = /^(true|false)$/.test(raw) ? raw === 'true' : /^-?\d+(\.\d+)?$/.test(raw) ? Number(raw) : raw;
    const parts = key.split('.');
    let at = doc;
    for (const p of parts.slice(0, -1)) at = (at[p] ??= {}) as Record<string, unknown>;
    at[parts.at(-1)!] = value;
  }
  writeFileSync(file, stringify(doc));
  return file;
}

/** The commands in backticks of a line of output, as printed (each starts as the tests run the CLI). */
function advised(output: string, pattern: RegExp): string[] {
  const line = output.split('\n').find((l) => pattern.test(l));
  expect(line, `no line matching ${pattern} in:\n${output}`).toBeDefined();
  const commands = [...line!.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
  for (const c of commands) expect(c.startsWith(`${CLI} `), c).toBe(true);
  return commands;
}

/** A printed command as the test expects it: the tests' CLI and these words. */
const cmd = (...words: string[]) => [CLI, ...words].join(' ');

function rows(file: string): Row[] {
  return readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Row);
}

describe('advice the CLI prints, followed as written', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv | undefined;
  const live: CliProcess[] = [];
  afterEach(async () => {
    for (const p of live.splice(0)) {
      p.child.kill('SIGTERM');
      await p.exited;
    }
    await env?.cleanup();
    env = undefined;
    judge.setScript([]);
    removeTmpDirs();
  });

  const fastFailingJudge = ['++judge.max_retries=0', '++queues.judge_attempts=1', '++judge.cache=false'];

  it('vcfleet run with judge_failed rows: the status and rejudge it names turn them into scores', async () => {
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url, overrides: fastFailingJudge });
    const cfg = { VCFLEET_CONFIG: configFile(env, path.join(env.dir, 'fleet.yaml')) };
    judge.setScript(() => ({ status: 500 }));
    const run = await runCli(['run', '--run-id', 'adv1'], cfg);
    expect(run.code, run.output).toBe(3);
    // Only judge failures are left: rejudge is advised, retry is not.
    const [status, rejudge, ...others] = advised(run.stdout, /^complete, but 3 of 3 rollouts are masked/);
    expect([status, rejudge, ...others]).toEqual([cmd('status', '--run-id', 'adv1'), cmd('rejudge', '--run-id', 'adv1')]);
    expect(rows(env.output).map((r) => r.failure_kind)).toEqual(['judge_failed', 'judge_failed', 'judge_failed']);
    judge.setScript([]); // the user fixes the judge
    const s = await pasteInShell(status, cfg);
    expect(s.code, s.output).toBe(0);
    expect(s.stdout).toContain('masked: judge_failed 3');
    // --no-wait only enqueues, and says how to finish: that advice, as written, finishes it.
    const queued = await pasteInShell(`${rejudge} --no-wait`, cfg);
    expect(queued.code, queued.output).toBe(0);
    const finish = advised(queued.stdout, /^sent 3 judge_failed row\(s\) of run adv1 back to the judge; no worker serves judge, results of this run: start one \(node bin\/vcfleet\.js run --run-id adv1\), or finish it with/);
    expect(finish).toEqual([cmd('rejudge', '--run-id', 'adv1')]);
    expect(rows(env.output).every((r) => r.failure_kind === 'judge_failed')).toBe(true);
    const r = await pasteInShell(finish[0], cfg);
    expect(r.code, r.output).toBe(0);
    expect(r.stdout).toContain('no worker serves judge, results: doing it in this process');
    expect(r.stdout).toContain('complete: all 3 rollouts scored');
    expect(rows(env.output).map((row) => [row.failure_kind, row.reward])).toEqual([[null, 1], [null, 1], [null, 1]]);
    // Nothing is left: retry says so, without advising to start anything.
    const again = await pasteInShell(cmd('retry', '--run-id', 'adv1'), cfg);
    expect(again.code, again.output).toBe(0);
    expect(again.stdout).toContain('requeued 0 failed job(s) of run adv1 (none); nothing left to retry in this run');
    expect(again.stdout).not.toContain('start one');
  }, 240_000);

  it('vcfleet run --config FILE ++settings: the advice repeats the file and where the run lives, and works as printed with nothing else', async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url, overrides: fastFailingJudge });
    // The prefix and the output path on the command line, the rest in a file named by --config.
    const where = ['++queues.prefix', '++output_jsonl_fpath'];
    const file = configFile(env, path.join(env.dir, 'my.yaml'), where.map((k) => k.slice(2)));
    const onCommandLine = env.overrides.filter((o) => where.some((k) => o.startsWith(`${k}=`)));
    judge.setScript(() => ({ status: 500 }));
    const run = await runCli(['run', '--run-id', 'adv3', '--config', file, ...onCommandLine, '++judge.cache=false']);
    expect(run.code, run.output).toBe(3);
    const [status, rejudge] = advised(run.stdout, /^complete, but 2 of 2 rollouts are masked/);
    expect(rejudge).toEqual(cmd('rejudge', '--run-id', 'adv3', '--config', file, ...onCommandLine));
    judge.setScript([]);
    const s = await pasteInShell(status);
    expect(s.code, s.output).toBe(0);
    expect(s.stdout).toContain('masked: judge_failed 2');
    // --no-wait's advice (who to start, or what finishes it) repeats them too, and works as printed.
    const queued = await pasteInShell(`${rejudge} --no-wait`);
    expect(queued.code, queued.output).toBe(0);
    const [finish] = advised(queued.stdout, /^sent 2 judge_failed row\(s\) of run adv3 back to the judge; no worker serves judge, results of this run: start one/);
    expect(queued.stdout).toContain(`start one (${[CLI, 'run', '--run-id', 'adv3', '--config', file, ...onCommandLine].join(' ')})`);
    expect(finish).toEqual(rejudge);
    const r = await pasteInShell(finish);
    expect(r.code, r.output).toBe(0);
    expect(r.stdout).toContain('complete: all 2 rollouts scored');
    expect(rows(env.output).map((row) => [row.failure_kind, row.reward])).toEqual([[null, 1], [null, 1]]);
  }, 240_000);

  it('vcfleet run without a REDIS_URL (its private Redis): retry as advised, from the same folder, finds the run and completes it', async () => {
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url, overrides: ['++queues.rollout_attempts=1'] });
    const scriptPath = env.config().agent.script_path!;
    writeFileSync(scriptPath, JSON.stringify({ '*': { answer: '@gold', infra_fail_attempts: 1 } }));
    const cfg = { VCFLEET_CONFIG: configFile(env, path.join(env.dir, 'fleet.yaml'), ['redis_url']) };
    const run = await runCli(['run', '--run-id', 'adv2'], cfg);
    expect(run.code, run.output).toBe(3);
    expect(run.output).toContain('started a private redis-server');
    // Only infrastructure failures are left: retry is advised, rejudge is not.
    const [, retry, ...others] = advised(run.stdout, /^complete, but 3 of 3 rollouts are masked/);
    expect([retry, ...others]).toEqual([cmd('retry', '--run-id', 'adv2')]);
    expect(rows(env.output).map((r) => r.failure_kind)).toEqual(['infra_failed', 'infra_failed', 'infra_failed']);
    writeFileSync(scriptPath, JSON.stringify({ '*': { answer: '@gold' } })); // the user fixes the sandboxes
    const r = await pasteInShell(retry, cfg);
    expect(r.code, r.output).toBe(0);
    expect(r.stdout).toContain('requeued 3 failed job(s) of run adv2 (3 rollout); no worker serves sandbox, judge, results: doing it in this process');
    expect(r.stdout).toContain('complete: all 3 rollouts scored');
    expect(rows(env.output).map((row) => [row.failure_kind, row.reward])).toEqual([[null, 1], [null, 1], [null, 1]]);
    // `vcfleet runs` from the same folder finds it too, in the private Redis, and says so.
    const listed = await runCli(['runs'], cfg);
    expect(listed.code, listed.output).toBe(0);
    expect(listed.stdout).toMatch(/^runs in the private Redis of \S+redis \(vcfleet run without REDIS_URL/);
    expect(listed.stdout).toMatch(/^adv2 +babyvision_opencode .* 3\/3 /m);
  }, 240_000);

  it('produce: the status it names says nobody serves the run and how to start one; that command; then rejudge waits for the live workers that serve it', async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url, overrides: fastFailingJudge });
    const cfg = { VCFLEET_CONFIG: configFile(env, path.join(env.dir, 'fleet.yaml')) };
    const produce = await runCli(['produce', '--run-id', 'adv3', '--skip-preflight'], cfg);
    expect(produce.code, produce.output).toBe(0);
    const watch = produce.stdout.split('\n').find((l) => l.startsWith(`watch it: ${CLI} `))!;
    const status = await pasteInShell(watch.replace('watch it: ', ''), cfg);
    expect(status.code, status.output).toBe(0);
    const start = status.stdout.match(/no worker serves sandbox, judge, results of this run: start one \(node bin\/vcfleet\.js worker sandbox\|judge\|results, or (node bin\/vcfleet\.js run --run-id adv3)\)/);
    expect(start, status.stdout).not.toBeNull();
    judge.setScript(() => ({ status: 500 }));
    const run = await pasteInShell(start![1], cfg);
    expect(run.code, run.output).toBe(3);
    const [, rejudge] = advised(run.stdout, /^complete, but 2 of 2 rollouts are masked/);
    judge.setScript([]);
    // Live workers serve the fleet's queues: rejudge names them and waits for their rows.
    live.push(startCli(['worker', 'judge'], cfg), startCli(['worker', 'results'], cfg));
    const redis = createRedis(REDIS_URL, 'client');
    try {
      await waitFor('a judge-worker and a results consumer to announce themselves', async () => {
        const roles = (await listWorkers(redis, env!.prefix)).live.map((w) => w.role).sort();
        return roles.join() === 'judge,results';
      }, 60_000, 200);
    } finally {
      redis.disconnect();
    }
    const r = await pasteInShell(rejudge, cfg);
    expect(r.code, r.output).toBe(0);
    expect(r.stdout).toMatch(/sent 2 judge_failed row\(s\) of run adv3 back to the judge; live workers serve it \(judge by [^;]+; results by [^)]+\): waiting for the rows/);
    expect(r.stdout).toContain('complete: all 2 rollouts scored');
    expect(rows(env.output).map((row) => [row.failure_kind, row.reward])).toEqual([[null, 1], [null, 1]]);
  }, 240_000);
});
