/**
 * A fleet test environment: a fixture benchmark prepared in a temp folder, a unique Redis key prefix
 * on the session's Redis, a scripted agent file, and the `++key=value` overrides that point every
 * command (in-process or a child process) at them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { loadConfig, type Config } from '../../src/shared/config/load.ts';
import { createLogger, type Logger } from '../../src/shared/logger.ts';
import { prepareBenchmark } from '../../src/prepare/prepare.ts';
import type { AgentScriptSchema } from '../../src/agent/scripted-agent.ts';
import type { z } from 'zod';
type AgentScript = z.input<typeof AgentScriptSchema>;
import { writeFixtureParquet, type Fixture, type FixtureOptions } from './fixture-parquet.ts';
import { captured, type CapturedOutput } from './processes.ts';
import { createTmpDir } from './tmp.ts';
import { deletePrefix } from './redis-keys.ts';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const FAKE_JUDGE_KEY = 'sk-judge-FLEETSECRET-0001';
export const FAKE_POLICY_KEY = 'sk-policy-FLEETSECRET-0002';
const ROOT = path.resolve(import.meta.dirname, '../..');

export interface FleetEnv {
  dir: string;
  prefix: string;
  fixture: Fixture;
  output: string;
  overrides: string[];
  config(extra?: string[]): Config;
  logger: Logger;
  /** Delete every key of this prefix (only ours: the prefix is unique). */
  cleanup(): Promise<void>;
}

export interface FleetEnvOptions {
  rows?: number;
  judgeUrl: string;
  script?: AgentScript;
  redisUrl?: string;
  overrides?: string[];
  /** Change the fixture parquet (e.g. `mutate` a row); `rows` still sets the count. */
  fixture?: Omit<FixtureOptions, 'rows'>;
}

export async function makeFleetEnv(options: FleetEnvOptions): Promise<FleetEnv> {
  const dir = createTmpDir('vcfleet-fleet-');
  const prefix = `vcftest-${randomBytes(4).toString('hex')}`;
  const fixture = writeFixtureParquet(path.join(dir, 'babyvision.parquet'), { ...options.fixture, rows: options.rows ?? 6 });
  const scriptPath = path.join(dir, 'agent-script.json');
  writeFileSync(scriptPath, JSON.stringify(options.script ?? { '*': { answer: '@gold' } }));
  const output = path.join(dir, 'out', 'results.jsonl');
  const overrides = [
    `++data_dir=${path.join(dir, 'data')}`,
    `++babyvision_parquet=${fixture.path}`,
    `++output_jsonl_fpath=${output}`,
    `++redis_url=${options.redisUrl ?? REDIS_URL}`,
    `++queues.prefix=${prefix}`,
    `++visual_coding_opencode_judge_base_url=${options.judgeUrl}`,
    `++judge.api_key=${FAKE_JUDGE_KEY}`,
    `++judge.max_retries=1`,
    `++judge.backoff_base_ms=50`,
    `++judge.timeout_s=5`,
    `++agent.kind=scripted`,
    `++agent.script_path=${scriptPath}`,
    `++queues.rollout_backoff_ms=100`,
    `++queues.lock_duration_ms=3000`,
    `++state_dir=${path.join(dir, 'state')}`,
    // The session's Redis keeps nothing on disk; tests accept that (preflight would refuse it).
    '++preflight.require_redis_persistence=false',
    ...(options.overrides ?? []),
  ];
  const logger = createLogger({ level: 'warn', secrets: [FAKE_JUDGE_KEY, FAKE_POLICY_KEY] });
  const config = (extra: string[] = []) => loadConfig({ overrides: [...overrides, ...extra], env: {} });
  await prepareBenchmark(config(), { benchmark: 'babyvision_opencode', logger, stderr: { write: () => true } });
  return {
    dir, prefix, fixture, output, overrides, config, logger,
    async cleanup() {
      const redis = new Redis(options.redisUrl ?? REDIS_URL);
      await deletePrefix(redis, prefix);
      redis.disconnect();
    },
  };
}

export interface CliProcess extends CapturedOutput {
  child: ChildProcess;
}

/** Run `vcfleet <args>` as its own OS process, as a user on another host would. */
export function startCli(args: string[], env: Record<string, string> = {}): CliProcess {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/vcfleet.js'), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', VCFLEET_LOG_JSON: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return { child, ...captured(child) };
}

/** A `vcfleet` process in a terminal of its own (a pseudo-terminal made by util-linux `script`). */
export interface TerminalCliProcess extends CliProcess {
  /** Type Ctrl-C: the terminal sends SIGINT to its whole foreground process group. */
  ctrlC(): void;
}

/**
 * Run `vcfleet <args>` as a user does in a terminal: `script` gives it a pseudo-terminal, where it is
 * the foreground process group, so a typed Ctrl-C reaches every process of that group (not only
 * vcfleet, as `kill -INT` would). The exit code is vcfleet's (`script -e`); stdout and stderr arrive
 * together, with CRLF line ends.
 */
export function startCliInTerminal(args: string[], env: Record<string, string> = {}): TerminalCliProcess {
  const quote = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
  // `exec`: vcfleet replaces script's shell, as in a terminal (a waiting dash would exit 130 on the SIGINT too).
  const command = `exec ${[process.execPath, path.join(ROOT, 'bin/vcfleet.js'), ...args].map(quote).join(' ')}`;
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', VCFLEET_LOG_JSON: '1', TERM: 'xterm', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => out, stdout: () => out, exited, ctrlC: () => void child.stdin!.write('\x03') };
}

/** How the tests run the CLI (`node bin/vcfleet.js` from the repository): what its printed advice starts with. */
export const CLI = 'node bin/vcfleet.js';

/**
 * Paste a printed command into a shell, as a user would: `bash -c` in the repository folder with
 * only PATH and HOME (and `env`, the user's own settings such as VCFLEET_CONFIG) set. The shell is
 * the leader of a process group of its own, killed whole (npm, its shell, vcfleet) once `timeoutMs`
 * passed or the test process exits, so a command that hangs fails the test without leaving orphans.
 */
export async function pasteInShell(command: string, env: Record<string, string> = {}, timeoutMs = 60_000): Promise<{ code: number | null; output: string; stdout: string }> {
  const child = spawn('bash', ['-c', command], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const out = captured(child);
  const killGroup = () => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // the group is gone
    }
  };
  process.once('exit', killGroup);
  const timer = setTimeout(killGroup, timeoutMs);
  const code = await out.exited;
  clearTimeout(timer);
  killGroup(); // what the command left in the background
  process.off('exit', killGroup);
  return { code, output: out.output(), stdout: out.stdout() };
}

export async function runCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; output: string; stdout: string }> {
  const p = startCli(args, env);
  const code = await p.exited;
  return { code, output: p.output(), stdout: p.stdout() };
}

export { waitFor } from './wait.ts';

/** The `++` settings of `overrides` that the CLI's advice repeats (where a run lives: its Redis, prefix and folders), in order. */
export function locatingOf(overrides: readonly string[]): string {
  return overrides.filter((o) => /^\+\+(data_dir|output_jsonl_fpath|output_root|redis_url|queues\.prefix|state_dir)=/.test(o)).join(' ');
}
