/**
 * The stand-in walkthroughs of docs/evaluate.md ("Trying it with a stand-in model") and docs/train.md
 * ("Trying serve with a stand-in model"), run from the docs' own text in a fresh folder: the lines
 * that serve until Ctrl-C (the stand-ins, `serve`, `view`) are started as processes with `--port 0`
 * added (the docs' ports replaced by the ones chosen, as parallel tests need), the rest pasted into
 * bash as written, with `./vcfleet` (the checkout's launcher, as the docs run it) meaning this checkout's CLI. No REDIS_URL: `run` uses its
 * private Redis in that folder; `serve` a redis-server of this test that keeps its data.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { captured, processesWith, type CapturedOutput } from './helpers/processes.ts';
import { createTmpDir, removeTmpDirs } from './helpers/tmp.ts';
import { waitFor } from './helpers/wait.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const CLI = path.join(ROOT, 'bin/vcfleet.js');
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  removeTmpDirs();
});

/** The fenced bash blocks of a doc's section (from its heading to the next heading of its level or above). */
function blocks(doc: string, heading: string): string[] {
  const text = readFileSync(path.join(ROOT, 'docs', doc), 'utf8');
  const start = text.indexOf(`${heading}\n`);
  expect(start, `${doc} has "${heading}"`).toBeGreaterThanOrEqual(0);
  const level = heading.split(' ')[0].length;
  // The section ends at the next heading of its level or above, outside a fenced block.
  const lines = text.slice(start).split('\n');
  let fenced = false;
  let end = lines.length;
  for (const [i, line] of lines.entries()) {
    if (line.startsWith('```')) fenced = !fenced;
    else if (i > 0 && !fenced && /^#+ /.test(line) && line.indexOf(' ') <= level) {
      end = i;
      break;
    }
  }
  return [...lines.slice(0, end).join('\n').matchAll(/```bash\n([\s\S]*?)```/g)].map((m) => m[1]);
}

/** A block's command lines: comments and blank lines dropped, a trailing `&` and comment cut. */
const commands = (block: string) => block.split('\n').map((l) => l.replace(/\s+#.*$/, '').replace(/\s*&$/, '').trim()).filter((l) => l && !l.startsWith('#'));

/** A fresh folder with the checkout's src and node_modules beside (for the docs' `node --import tsx` line), and `./vcfleet` execing this checkout's CLI. */
function freshFolder(): string {
  const cwd = createTmpDir('vcfleet-walkthrough-');
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(cwd, 'node_modules'));
  symlinkSync(path.join(ROOT, 'src'), path.join(cwd, 'src'));
  symlinkSync(path.join(ROOT, 'vcfleet'), path.join(cwd, 'vcfleet'));
  return cwd;
}

function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  for (const key of Object.keys(env)) if (/^(REDIS_URL|POLICY_|JUDGE_|OPENAI_API_KEY|VCFLEET_|BABYVISION_PARQUET)/.test(key) && !(key in extra)) delete env[key];
  return env;
}

interface Served { out: CapturedOutput; child: ChildProcess; port: string }

/** Start a documented `./vcfleet …` line that serves until Ctrl-C, on any free port; `printed` finds its URL. */
async function serveLine(line: string, cwd: string, env: NodeJS.ProcessEnv, printed: RegExp): Promise<Served> {
  const words = line.replace(/^\.\/vcfleet /, '').split(/\s+/);
  const child = spawn(process.execPath, [CLI, ...words, '--port', '0'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const out = captured(child);
  const url = await waitFor(`the URL of \`${line}\``, () => printed.exec(out.stdout())?.[1], 120_000, 100).catch(() => undefined);
  expect(url, out.output()).toBeTruthy();
  return { out, child, port: new URL(url!).port };
}

/** The port a documented line asks for (its `--port`, else the default of what it serves). */
const docPort = (line: string, fallback: string) => /--port (\d+)/.exec(line)?.[1] ?? fallback;

function bash(script: string, cwd: string, env: NodeJS.ProcessEnv): CapturedOutput {
  const child = spawn('bash', ['-c', `set -euo pipefail\n${script}`], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return captured(child);
}

async function stop(served: Served[]): Promise<void> {
  for (const s of served) s.child.kill('SIGINT');
  for (const s of served) expect(await s.out.exited, s.out.output()).toBe(0);
}

const STAND_IN_URL = /export (?:POLICY|JUDGE)_BASE_URL=(\S+)/;

describe('the stand-in walkthroughs, as written in the docs', () => {
  it('evaluate.md: two stand-in policies and the judge, puzzles, two runs, compare and the compare page', async () => {
    const [policies, judge, steps] = blocks('evaluate.md', '## Trying it with a stand-in model').map(commands);
    expect(policies.length).toBe(2);
    const cwd = freshFolder();
    const env = cleanEnv();
    const ports = new Map<string, string>();
    const served: Served[] = [];
    for (const line of [...policies, ...judge]) {
      const s = await serveLine(line, cwd, env, STAND_IN_URL);
      ports.set(docPort(line, line.includes('judge') ? '8011' : '8010'), s.port);
      served.push(s);
    }
    const viewLine = steps.find((l) => l.startsWith('./vcfleet view'))!;
    const script = steps.filter((l) => l !== viewLine).join('\n').replace(/127\.0\.0\.1:(\d+)/g, (m, p: string) => (ports.has(p) ? `127.0.0.1:${ports.get(p)}` : m));
    const run = bash(script, cwd, env);
    expect(await run.exited, run.output()).toBe(0);
    const rows = (f: string) => readFileSync(path.join(cwd, 'results', f), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { reward: number | null; task_id: string });
    const [a, b] = [rows('stand-in-a.jsonl'), rows('stand-in-b.jsonl')];
    expect([a.length, b.length]).toEqual([8, 8]);
    expect([...a, ...b].every((r) => r.reward === 0 || r.reward === 1)).toBe(true);
    // Seeded draws: the repeats of a task differ somewhere, and the two policies answer differently.
    expect(a.some((r) => r.reward === 1) && a.some((r) => r.reward === 0)).toBe(true);
    expect(a.map((r) => r.reward)).not.toEqual(b.map((r) => r.reward));
    expect(run.stdout()).toMatch(/B − A|B - A/);
    const view = await serveLine(viewLine, cwd, env, /viewer: (\S+)/);
    const url = /viewer: (\S+)/.exec(view.out.stdout())![1];
    expect(url).toMatch(/\/compare\?a=.+&b=.+$/);
    const compare = await (await fetch(url.replace('/compare?', '/api/compare?'))).json();
    expect(compare.comparison.pairs).toBe(4);
    await stop([...served, view]);
    // The runs used the private Redis of this folder, and nothing of it is left running.
    expect(existsSync(path.join(cwd, '.vcfleet', 'redis'))).toBe(true);
    expect(processesWith(cwd)).toEqual([]);
  }, 900_000);

  it('train.md: serve with token capture against the stand-in, one rollout with its token ids', async () => {
    const [standIns, service, steps] = blocks('train.md', '### Trying serve with a stand-in model').map(commands);
    const cwd = freshFolder();
    const redisDir = path.join(cwd, 'redis');
    mkdirSync(redisDir);
    const port = await freePort();
    const ownRedis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', redisDir, '--appendonly', 'yes', '--save', ''], { stdio: 'ignore' });
    children.push(ownRedis);
    const env = cleanEnv();
    const ports = new Map<string, string>();
    const served: Served[] = [];
    for (const line of standIns) {
      const s = await serveLine(line, cwd, env, STAND_IN_URL);
      ports.set(docPort(line, line.includes('judge') ? '8011' : '8010'), s.port);
      served.push(s);
    }
    ports.set('6379', String(port));
    const local = (text: string) => text.replace(/127\.0\.0\.1:(\d+)/g, (m, p: string) => (ports.has(p) ? `127.0.0.1:${ports.get(p)}` : m));
    const exported = Object.fromEntries(service.filter((l) => l.startsWith('export ')).flatMap((l) => local(l).slice(7).split(/\s+/).map((kv) => kv.split('=') as [string, string])));
    const serveCmd = service.find((l) => l.startsWith('./vcfleet serve'))!;
    const serve = await serveLine(serveCmd, cwd, cleanEnv(exported), /serve: (\S+)/);
    ports.set('8088', serve.port);
    // The heredoc's lines are the script's as written; only the ports change.
    const script = bash(local(blocks('train.md', '### Trying serve with a stand-in model')[2]), cwd, env);
    expect(await script.exited, script.output()).toBe(0);
    expect(steps.some((l) => l.includes('/run'))).toBe(true);
    expect(script.stdout()).toMatch(/mask_sample: false/);
    expect(Number(/calls_with_token_ids: (\d+)/.exec(script.stdout())?.[1])).toBeGreaterThanOrEqual(2);
    expect(Number(/prompt_tokens_of_first_call: (\d+)/.exec(script.stdout())?.[1])).toBeGreaterThan(100);
    await stop([serve, ...served]);
    const redisExited = new Promise((resolve) => ownRedis.once('exit', resolve));
    ownRedis.kill('SIGTERM');
    await redisExited;
  }, 900_000);
});

async function freePort(): Promise<number> {
  const net = await import('node:net');
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}
