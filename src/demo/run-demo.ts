/**
 * `vcfleet demo`: a self-contained run on the bundled synthetic puzzles. The project's scripted
 * policy and judge servers start in-process on loopback, a private Redis (unless REDIS_URL is set),
 * the real OpenCode in real sandboxes (`local` unless the configuration names another provider, e.g.
 * `VCFLEET_SANDBOX_PROVIDER=opensandbox`), the progress bar, the JSONL and metrics at the end.
 * No model, no key, no network. The run has queues of its own (so a shared Redis is fine) and is
 * marked a demo, so that `vcfleet run --run-id` or `vcfleet demo --run-id` resumes it as one.
 */
import path from 'node:path';
import { loadConfig, type Config } from '../shared/config/load.ts';
import type { Logger } from '../shared/logger.ts';
import { runAll, type RunAllOptions, type RunAllResult } from '../all-in-one/run-all.ts';
import { newRunId } from '../producer/produce.ts';
import { demoAnswers, demoPuzzles, writeDemoBenchmark } from './puzzles.ts';
import { startScriptedPolicyServer } from './scripted-policy-server.ts';
import { scripts } from './scripted-policy-scripts.ts';
import { startScriptedJudgeServer } from './scripted-judge-server.ts';
import type { InFlightJobs } from '../shared/queue/in-flight-jobs.ts';
import { vcfleetCommand } from '../shared/text/advice.ts';

export interface DemoOptions {
  configPath?: string;
  overrides: readonly string[];
  logger: Logger;
  signal?: AbortSignal;
  /** This process's held jobs, handed back when a second Ctrl-C exits at once. */
  inFlight?: InFlightJobs;
  onStart?(runId: string, total: number, created: boolean): void;
  /** Resume this demo run (from what Redis holds) instead of starting a new one. */
  runId?: string;
  /** Finish work `retry` or `rejudge` sent back to this demo run (runAll's `requeued`). */
  requeued?: RunAllOptions['requeued'];
  /** The Redis of the run (set by `retry` and `rejudge`, which found it); default as configured. */
  redisUrl?: string;
}

/** The model the demo's scripted policy server serves (and preflight finds listed). */
const DEMO_POLICY_MODEL = 'scripted-demo-vlm';

/** The demo's settings; `++key=value` overrides still apply on top. */
function demoConfig(base: Pick<Config, 'state_dir' | 'sandbox_provider'>, policyUrl: string, judgeUrl: string, options: DemoOptions): Config {
  const dir = path.join(base.state_dir, 'demo');
  const runId = options.runId ?? newRunId('demo');
  return loadConfig({
    configPath: options.configPath,
    flags: {
      benchmark: 'babyvision_opencode',
      data_dir: path.join(dir, 'data'),
      babyvision_parquet: null,
      reuse_existing_data_preparation: true,
      output_jsonl_fpath: path.join('results', 'demo', `${runId}.jsonl`),
      run_id: runId,
      limit: null,
      num_repeats: 1,
      task_timeout_s: 300,
      policy_base_url: policyUrl,
      policy_api_key: 'demo-policy-key',
      policy_model_name: DEMO_POLICY_MODEL,
      visual_coding_opencode_judge_base_url: judgeUrl,
      visual_coding_opencode_judge_model_name: 'scripted-demo-judge',
      'judge.api_key': 'demo-judge-key',
      'agent.kind': 'opencode',
      // The provider configured (default `local`): a demo also tries a fleet's sandboxes out.
      sandbox_provider: base.sandbox_provider,
      'queues.rollout_concurrency': 2,
    },
    overrides: options.overrides,
  });
}

export async function runDemo(options: DemoOptions): Promise<{ result: RunAllResult; config: Config }> {
  const base = loadConfig({ configPath: options.configPath, overrides: options.overrides });
  const puzzles = demoPuzzles();
  const policy = await startScriptedPolicyServer({ script: scripts.demo(demoAnswers(puzzles)), modelName: DEMO_POLICY_MODEL });
  const judge = await startScriptedJudgeServer();
  try {
    const demo = demoConfig(base, policy.url, judge.url, options);
    const config = options.redisUrl ? { ...demo, redis_url: options.redisUrl } : demo;
    await writeDemoBenchmark(config.data_dir, config.benchmark, puzzles);
    options.logger.info({ puzzles: puzzles.length, policy: policy.url, judge: judge.url }, 'demo: scripted policy and judge servers started on loopback');
    const result = await runAll({ config, logger: options.logger, signal: options.signal, inFlight: options.inFlight, onStart: options.onStart, origin: 'demo', requeued: options.requeued });
    return { result, config };
  } finally {
    await policy.close();
    await judge.close();
  }
}

export const nextSteps = (): string => `
Next: the same run against a real policy endpoint and judge:

  export POLICY_BASE_URL=http://your-vlm-server:8000/v1 POLICY_MODEL=your-model POLICY_API_KEY=...
  export OPENAI_API_KEY=...            # the judge (default gpt-4o-mini on the OpenAI API)
  export BABYVISION_PARQUET=/path/to/train-00000-of-00001.parquet   # offline copy of BabyVision
  ${vcfleetCommand('run --benchmark babyvision_opencode ++limit=10')}

Any OpenAI-compatible judge: ++visual_coding_opencode_judge_base_url=http://judge:8000/v1 ++visual_coding_opencode_judge_model_name=NAME
`;
