/**
 * Benchmark 12, token capture: the per-task time of the whole harness with `policy.token_capture`
 * on vs off, against the same vLLM-shaped scripted server (test/helpers/vllm-policy-server.ts: a toy
 * tokenizer, token ids and log-probabilities when asked), in one run with the sides alternating after
 * an untimed warm-up; and the trajectory's size per policy call, as JSON and gzipped (as it travels
 * through Redis). The conversation reads the puzzle image, runs bash, then answers (3 calls).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { gzipSync } from 'node:zlib';
import { discardLogger } from './lib/fleet.ts';
import { createSandboxProvider } from '../src/sandboxes/index.ts';
import { createOpenCodeRunner } from '../src/agent/opencode-runner.ts';
import { toolResults } from '../src/demo/scripted-policy-scripts.ts';
import type { Script } from '../src/demo/scripted-policy-types.ts';
import { startVllmPolicyServer, type VllmPolicyServer } from '../test/helpers/vllm-policy-server.ts';
import { harnessConfig, harnessRequest } from './lib/opencode-session.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, median } from './lib/stats.ts';

export interface TokenCaptureBenchOptions {
  dir: string;
  /** Timed runs of each side. Default 3. */
  runs: number;
  log?: (line: string) => void;
}

const readBashAnswer: Script = (body) => {
  const n = toolResults(body);
  if (n === 0) return { kind: 'tool_calls', text: 'Let me look at the picture.', calls: [{ name: 'read', arguments: { filePath: 'puzzle.png' } }] };
  if (n === 1) return { kind: 'tool_calls', text: 'Now a quick check.', calls: [{ name: 'bash', arguments: { command: 'echo left', description: 'Say it' } }] };
  return { kind: 'text', text: 'The left half is red: \\boxed{A}' };
};

interface Side {
  seconds: number;
  json: number;
  gz: number;
  calls: number;
}

async function oneRun(server: VllmPolicyServer, dir: string, id: string, tokenCapture: boolean): Promise<Side> {
  const config = harnessConfig();
  const logger = discardLogger('warn');
  const provider = createSandboxProvider(config, { logger });
  const runner = createOpenCodeRunner({ config, logger, provider, socketDir: path.join(dir, 'sockets') });
  const request = harnessRequest(config, server, dir, id);
  request.policy = { ...request.policy, model: 'toy', settings: { ...request.policy.settings, token_capture: tokenCapture, weight_version: 'bench' } };
  const t = performance.now();
  try {
    const result = await runner.run(request, new AbortController().signal);
    const seconds = (performance.now() - t) / 1000;
    if (result.outcome.extracted_answer !== 'A') throw new Error(`run ${id} ended ${result.outcome.stop_reason}: ${result.outcome.error ?? ''}`);
    const traj = result.trajectory?.record;
    if (tokenCapture && (!traj || traj.mask_sample)) throw new Error(`run ${id}: the trajectory is ${traj ? `masked (${traj.mask_reason})` : 'missing'}`);
    const json = traj ? Buffer.byteLength(JSON.stringify(traj)) : 0;
    return { seconds, json, gz: traj ? gzipSync(JSON.stringify(traj)).length : 0, calls: traj?.calls.length ?? result.outcome.turns };
  } finally {
    await runner.close();
    await provider.close();
  }
}

export async function benchTokenCapture(opts: TokenCaptureBenchOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const dir = mkdtempSync(path.join(opts.dir, 'token-capture-'));
  const server = await startVllmPolicyServer(readBashAnswer);
  try {
    await oneRun(server, dir, 'warm', true);
    const on: Side[] = [];
    const off: Side[] = [];
    for (let n = 1; n <= opts.runs; n++) {
      // Alternate which side goes first, so a drift of the machine weighs on both.
      const order = n % 2 === 1 ? [false, true] : [true, false];
      for (const capture of order) (capture ? on : off).push(await oneRun(server, dir, `tc-${capture ? 'on' : 'off'}-${n}`, capture));
      log(`  run ${n}: token capture off ${fmt(off.at(-1)!.seconds)} s, on ${fmt(on.at(-1)!.seconds)} s`);
    }
    const [mOn, mOff] = [median(on.map((s) => s.seconds)), median(off.map((s) => s.seconds))];
    const perCall = (k: 'json' | 'gz') => median(on.map((s) => s[k] / s.calls));
    return [
      {
        bench: '12 token capture', metric: 'rollout time, token capture on / off', value: fmt(mOn / mOff),
        note: `medians of ${opts.runs} runs each, alternating: ${fmt(mOn)} s vs ${fmt(mOff)} s (on ${on.map((s) => fmt(s.seconds)).join(', ')}; off ${off.map((s) => fmt(s.seconds)).join(', ')}); 3 policy calls (read image, bash, answer) against a vLLM-shaped scripted server that answers at once`,
      },
      {
        bench: '12 token capture', metric: 'trajectory bytes per call, JSON / gzipped', value: `${fmt(perCall('json'), 0)} / ${fmt(perCall('gz'), 0)}`,
        note: `toy tokenizer (a token per byte of the rendered chat, 4 per image); a whole trajectory (per-call ids and the flat form) is ${fmt(median(on.map((s) => s.json)), 0)} bytes of JSON, ${fmt(median(on.map((s) => s.gz)), 0)} gzipped, median`,
      },
    ];
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
