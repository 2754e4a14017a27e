/**
 * Benchmark 9, how promptly things stop: each deadline or abort the tests prove is honoured, timed
 * here instead (the tests assert what happens, never how fast). Every figure is the time from the
 * moment a stop was due to the moment the caller had its result, medians of `runs`, and the ratio of
 * the whole wait to the deadline it was given (1.00 = returned exactly at the deadline).
 *
 *   sandbox timeout    local provider: a 300 ms command whose setsid daemon keeps running, killed whole
 *   OpenSandbox grace  the OpenSandbox provider (against the scripted server) when the interrupt is ignored
 *   judge abort        the judge aborted during a hung call, and during a 1 s Retry-After wait
 *   Redis unreachable  `vcfleet worker judge` with nothing listening, redis.connect_timeout_s=3
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { ConfigSchema } from '../src/shared/config/load.ts';
import { LocalBwrapProvider } from '../src/sandboxes/local/provider.ts';
import { OpenSandboxProvider } from '../src/sandboxes/opensandbox/provider.ts';
import { createJudge } from '../src/workers/judge/openai-judge.ts';
import { startScriptedJudgeServer } from '../src/demo/scripted-judge-server.ts';
import { startFakeOpenSandbox } from '../test/helpers/fake-opensandbox-server.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, median } from './lib/stats.ts';

export interface StopsBenchOptions {
  dir: string;
  /** Timed stops of each kind. Default 5. */
  runs: number;
  log?: (line: string) => void;
}

const ROOT = path.resolve(import.meta.dirname, '..');

/** Milliseconds `fn` takes, `runs` times. */
async function times(runs: number, fn: (n: number) => Promise<void>): Promise<number[]> {
  const out: number[] = [];
  for (let n = 0; n < runs; n++) {
    const t = performance.now();
    await fn(n);
    out.push(performance.now() - t);
  }
  return out;
}

function row(metric: string, waitedMs: number[], deadlineMs: number, note: string): BenchRow {
  const m = median(waitedMs);
  return {
    bench: '9 stops', metric, value: fmt(m / deadlineMs),
    note: `median ${fmt(m, 0)} ms for a ${fmt(deadlineMs, 0)} ms deadline (late by ${fmt(m - deadlineMs, 0)} ms; max ${fmt(Math.max(...waitedMs), 0)} ms of ${waitedMs.length}); ${note}`,
  };
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function benchStops(opts: StopsBenchOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const dir = mkdtempSync(path.join(opts.dir, 'stops-'));
  // A root worker's sandboxes run as an unprivileged uid, which must pass through to its folder.
  for (const d of [opts.dir, dir]) chmodSync(d, 0o711);
  const rows: BenchRow[] = [];
  try {
    // The local provider: the whole tree of a timed-out command, a setsid daemon included.
    const local = new LocalBwrapProvider({ workdir: '/workspace', rootDir: path.join(dir, 'local') });
    try {
      const sb = await local.create({ label: 'bench-stops', gateway: { port: 1 } });
      const ms = await times(opts.runs, async (n) => {
        const r = await sb.exec(['sh', '-c', `setsid sleep 90${n}7 & sleep 90${n}7`], { timeoutMs: 300 });
        if (!r.timedOut) throw new Error(`the command of run ${n} was not timed out: ${JSON.stringify(r)}`);
      });
      await sb.destroy();
      rows.push(row('sandbox timeout: returned / timeout (local provider)', ms, 300, 'command + setsid daemon killed as one tree'));
      log(`  local sandbox timeout: ${ms.map((x) => fmt(x, 0)).join(', ')} ms`);
    } finally {
      await local.close();
    }

    // OpenSandbox: the command ignores the interrupt; the provider returns at timeout + grace.
    const fake = await startFakeOpenSandbox({ apiKey: 'bench-key' });
    fake.options.ignoreInterrupt = true;
    try {
      const provider = new OpenSandboxProvider({
        domain: fake.domain, apiKey: 'bench-key', image: 'bench/sandbox:1', ttlS: 600, resources: { cpu: 1, memory_mib: 1024 },
        workdir: '/workspace', readyTimeoutS: 2, killGraceMs: 300,
      });
      const sb = await provider.create({ label: 'bench-stops', gateway: { url: 'http://gw.bench.internal:1', port: 1 } });
      const ms = await times(opts.runs, async (n) => {
        const r = await sb.exec(['sleep', '30'], { timeoutMs: 300 });
        if (!r.timedOut) throw new Error(`the command of run ${n} was not timed out`);
      });
      await sb.destroy();
      rows.push(row('OpenSandbox grace: returned / (timeout + grace)', ms, 600, 'the interrupt ignored by the command: 300 ms timeout + 300 ms grace'));
    } finally {
      await fake.close();
    }

    // The judge: aborted during a hung call, and during a Retry-After wait.
    const server = await startScriptedJudgeServer();
    try {
      const config = ConfigSchema.parse({
        visual_coding_opencode_judge_base_url: server.url, visual_coding_opencode_judge_model_name: 'judge-model',
        judge: { api_key: 'sk-bench', timeout_s: 30, max_retries: 2, backoff_base_ms: 10, backoff_max_ms: 50, cache: false },
      });
      const input = { question: 'q', expectedAnswer: 'A', extractedAnswer: 'A', responseText: '\\boxed{A}' };
      const logger = pino({ level: 'silent' });
      const abortAfter = async (script: Parameters<typeof server.setScript>[0], capMs: number, abortMs: number): Promise<number[]> =>
        times(opts.runs, async () => {
          server.setScript(script);
          const judge = createJudge({ config, logger, retryAfterCapMs: capMs });
          const ac = new AbortController();
          setTimeout(() => ac.abort(), abortMs);
          const r = await judge.grade(input, ac.signal);
          if (r.status !== 'failed') throw new Error(`the judge was not aborted: ${JSON.stringify(r)}`);
          await judge.close();
        });
      rows.push(row('judge abort during a hung call: returned / abort time', await abortAfter(() => ({ hang: true }), 1000, 100), 100, 'the call hangs; the abort comes 100 ms in'));
      rows.push(row('judge abort during a retry wait: returned / abort time', await abortAfter([{ status: 429, headers: { 'retry-after': '30' } }], 1000, 200), 200,
        'a 429 asks for 30 s (capped at 1 s); the abort comes 200 ms in, 800 ms before the wait ends'));
      // The capped waits the aborts left run out before the server closes.
      await new Promise((resolve) => setTimeout(resolve, 1100));
    } finally {
      await server.close();
    }

    // A role with nothing listening at its Redis URL: it stops after redis.connect_timeout_s.
    const closed = await freePort();
    const cli = async (args: string[]): Promise<number | null> => {
      const child = spawn(process.execPath, [path.join(ROOT, 'bin/vcfleet.js'), ...args], { stdio: 'ignore', env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' } });
      return new Promise<number | null>((resolve) => child.on('exit', resolve));
    };
    const n = Math.min(opts.runs, 3);
    const start = median(await times(n, async () => void (await cli(['--help']))));
    const ms = await times(n, async () => {
      const code = await cli(['worker', 'judge', `++redis_url=redis://127.0.0.1:${closed}`, '++redis.connect_timeout_s=3', '++preflight.enabled=false', '++queues.prefix=vcfbench-stops']);
      if (code === 0) throw new Error('vcfleet worker judge exited 0 with no Redis');
    });
    rows.push(row('Redis unreachable: a role exits / redis.connect_timeout_s', ms, 3000,
      `of which the CLI's own start is ${fmt(start, 0)} ms (\`vcfleet --help\`, median of ${n})`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
