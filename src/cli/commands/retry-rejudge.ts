/**
 * `vcfleet retry` and `vcfleet rejudge`: send a run's failed jobs or judge_failed rows back, then
 * finish the work. Live workers of the run's queues pick it up (this command names them and waits for
 * the rows); roles nobody serves (a finished `vcfleet run`) run here, with the run's settings and this
 * host's endpoints and keys, and the same progress line, summary and exit codes as `vcfleet run`.
 * `--no-wait` only enqueues.
 */
import type { Command } from 'commander';
import { ConfigError } from '../../shared/errors.ts';
import { InFlightJobs } from '../../shared/queue/in-flight-jobs.ts';
import { byStage, nextStage, QUEUE_NAMES, STAGES, type QueueName } from '../../shared/queue/registry.ts';
import { RunStore, type RunRecord } from '../../shared/stores/run-store.ts';
import { WORKER_ROLES, type WorkerRole } from '../../workers/roles.ts';
import { DemoRunToResume, runAll, type RunAllResult } from '../../all-in-one/run-all.ts';
import { runDemo } from '../../demo/run-demo.ts';
import { rejudge, retryFailed, type RequeuedJobs } from '../../ops/requeue.ts';
import { describeServing, howToServe, servingOf, unservedNotice, type Serving } from '../../ops/serving.ts';
import type { Cli, CommandContext } from '../context.ts';
import type { Redis } from '../../shared/redis/connect.ts';
import { connectToRun } from '../run-redis.ts';
import { onShutdownSignals, stopOnFatal } from '../runtime.ts';
import { finish } from './run.ts';
import { vcfleetCommand } from '../../shared/text/advice.ts';
import { countWord, wordList } from '../word-list.ts';

type Kind = 'retry' | 'rejudge';

interface RequeueOpts {
  config?: string;
  runId: string;
  stage?: string;
  /** commander's `--no-wait`: false when given. */
  wait: boolean;
  /** rejudge: also grade again every row graded by older scoring rules. */
  rescore?: boolean;
  /** rejudge: commander's `--no-cache`: false when given (grade by calls to the judge, never from its cache). */
  cache?: boolean;
}

/** The roles that finish requeued jobs: each stage's, and every stage's after it (a rollout goes on to the judge and the results). */
export function rolesFor(jobs: RequeuedJobs): Set<WorkerRole> {
  const roles = new Set<WorkerRole>();
  for (const name of QUEUE_NAMES) {
    if (jobs[name] > 0) for (let s: QueueName | null = name; s !== null; s = nextStage(s)) roles.add(STAGES[s].role);
  }
  return roles;
}

function jobsText(jobs: RequeuedJobs): string {
  const parts = (Object.entries(jobs) as Array<[QueueName, number]>).filter(([, n]) => n > 0).map(([q, n]) => `${n} ${q}`);
  return parts.length ? parts.join(', ') : 'none';
}

/** Send the work back; what was sent, for the first line, and the jobs by stage. */
async function sendBack(kind: Kind, opts: RequeueOpts, { config, logger }: CommandContext, redis: Redis, stages: QueueName[]): Promise<{ text: string; jobs: RequeuedJobs }> {
  const runId = opts.runId;
  if (kind === 'retry') {
    const jobs = await retryFailed(redis, config.queues.prefix, runId, stages, logger);
    const total = QUEUE_NAMES.reduce((n, q) => n + jobs[q], 0);
    return { text: `requeued ${total} failed job(s) of run ${runId} (${jobsText(jobs)})`, jobs };
  }
  const { sent, rescored, missing } = await rejudge(redis, config.queues.prefix, runId, logger, config.queues, { rescore: opts.rescore, noCache: opts.cache === false });
  const note = missing ? `; ${missing} had no kept outcome (retry them with \`${vcfleetCommand(`retry --run-id ${runId} --stage rollout`)}\`)` : '';
  const what = opts.rescore ? `${sent} row(s) (${sent - rescored} judge_failed, ${rescored} graded by older scoring rules)` : `${sent} judge_failed row(s)`;
  return { text: `sent ${what} of run ${runId} back to the judge${note}`, jobs: { ...byStage(() => 0), judge: sent } };
}

async function requeueAndFinish(kind: Kind, opts: RequeueOpts, cli: Cli): Promise<void> {
  if (opts.stage && !QUEUE_NAMES.includes(opts.stage as QueueName)) throw new ConfigError(`--stage must be ${wordList(QUEUE_NAMES, 'or')}, not "${opts.stage}"`);
  const stages: QueueName[] = opts.stage ? [opts.stage as QueueName] : [...QUEUE_NAMES];
  const context = cli.context(opts, { run_id: opts.runId }, true);
  const { config, logger } = context;
  const conn = await connectToRun(config, logger, opts.runId);
  try {
    let run: RunRecord;
    let sent: { text: string; jobs: RequeuedJobs };
    let here: Set<WorkerRole>;
    let served: string;
    let serving: Serving;
    let waiting: string | null = null;
    try {
      run = await new RunStore(conn.redis, config.queues.prefix).requireRun(opts.runId);
      sent = await sendBack(kind, opts, context, conn.redis, stages);
      const needed = rolesFor(sent.jobs);
      serving = await servingOf(conn.redis, config.queues.prefix, run);
      here = new Set(WORKER_ROLES.filter((r) => needed.has(r) && !serving.byRole.has(r)));
      served = describeServing(serving, [...needed]);
      if (needed.size === 0) waiting = await unservedNotice(conn.redis, config.queues.prefix, run);
    } finally {
      conn.redis.disconnect();
    }
    if (rolesFor(sent.jobs).size === 0) {
      // Nothing was sent: a worker is advised only when jobs of the run still wait for one.
      process.stdout.write(`${sent.text}; ${waiting ?? `nothing left to ${kind} in this run`}\n`);
      return;
    }
    // What finishes the work later, with this invocation's locating settings (the printed advice must work as written).
    const finishWith = vcfleetCommand(`${kind} --run-id ${opts.runId}${opts.rescore ? ' --rescore' : ''}${opts.cache === false ? ' --no-cache' : ''}`);
    if (!opts.wait) {
      const who = served && here.size === 0 ? `live workers pick them up now (${served})` : `no worker serves ${[...here].join(', ')} of this run: start one (${howToServe(run)}), or finish it with \`${finishWith}\``;
      process.stdout.write(`${sent.text}; ${who}\n`);
      return;
    }
    const doing = here.size === 0
      ? `live workers serve it (${served}): waiting for the rows (Ctrl-C stops waiting; the work stays queued)`
      : `${served ? `live workers serve part of it (${served}); ` : ''}no worker serves ${[...here].join(', ')}: doing it in this process (Ctrl-C hands it back to the queue)`;
    process.stdout.write(`${sent.text}; ${doing}\n`);
    const inFlight = new InFlightJobs();
    const signal = onShutdownSignals(logger, async () => {}, { hint: () => `the work stays queued: finish it with ${finishWith}`, inFlight });
    const requeued = { roles: here };
    const runConfig = { ...config, redis_url: conn.url ?? config.redis_url, run_id: opts.runId };
    let result: RunAllResult;
    try {
      result = await runAll({ config: runConfig, logger, signal, inFlight, requeued, onFatalRedis: stopOnFatal });
    } catch (err) {
      if (!(err instanceof DemoRunToResume)) throw err;
      result = (await runDemo({ configPath: opts.config, overrides: cli.overrides, logger, signal, inFlight, runId: err.runId, requeued, redisUrl: conn.url ?? undefined })).result;
    }
    const after = result.status === 'stopped' ? `the requeued work stays queued: finish it with \`${finishWith}\` or ${howToServe(run)}\n` : '';
    finish(result, after);
  } finally {
    await conn.close();
  }
}

export function registerRequeue(program: Command, cli: Cli): void {
  const exitCodes = '\nExit codes (as `vcfleet run`): 0 every rollout scored, 3 some rollouts masked, 4 incomplete, 2 bad config or a failed preflight; 0 with --no-wait once enqueued.';
  program
    .command('retry')
    .description('requeue the failed jobs of a run (attempts reset) and finish them: live workers pick them up, else this process runs the roles they need')
    .requiredOption('--run-id <id>', 'the run')
    .option('--stage <stage>', `${wordList(QUEUE_NAMES, 'or')} (default: all ${countWord(QUEUE_NAMES.length)})`)
    .option('--no-wait', 'only enqueue; do not wait for the rows or run any role here')
    .option('--config <path>', 'config YAML')
    .addHelpText('after', exitCodes)
    .action((opts: RequeueOpts) => requeueAndFinish('retry', opts, cli));

  program
    .command('rejudge')
    .description('send the judge_failed rows of a run back to the judge (the agent is not run again) and wait for the new gradings')
    .requiredOption('--run-id <id>', 'the run')
    .option('--rescore', "also grade again, by today's scoring rules, every row graded by older ones (from the kept response text)")
    .option('--no-cache', "grade by calls to the judge, never from its verdict cache (whatever the run's judge.cache)")
    .option('--no-wait', 'only enqueue; do not wait for the rows or run any role here')
    .option('--config <path>', 'config YAML')
    .addHelpText('after', exitCodes)
    .action((opts: RequeueOpts) => requeueAndFinish('rejudge', opts, cli));
}
