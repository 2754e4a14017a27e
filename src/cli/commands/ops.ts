/** `vcfleet status`, `retry`, `rejudge`: operate a run from any host with REDIS_URL. */
import type { Command } from 'commander';
import { ConfigError } from '../../shared/errors.ts';
import { QUEUE_NAMES, type QueueName } from '../../shared/queues.ts';
import type { Redis } from '../../shared/redis.ts';
import { RunStore } from '../../shared/run-store.ts';
import { listWorkers } from '../../shared/worker-registry.ts';
import type { Cli } from '../context.ts';
import { connect, table } from '../runtime.ts';
import { runStatus, type RunStatus } from '../../ops/run-status.ts';
import { JOB_STATES } from '../../ops/run-jobs.ts';
import { rejudge, retryFailed } from '../../ops/requeue.ts';

function formatStatus(s: RunStatus): string {
  const acc = s.accuracy === null ? '-' : `${(100 * s.accuracy).toFixed(1)}%`;
  const masked = Object.entries(s.masked).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
  const stops = Object.entries(s.stop_reasons).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
  const jobs = table([['queue', ...JOB_STATES], ...QUEUE_NAMES.map((q) => [q, ...JOB_STATES.map((st) => s.jobs[q][st])])]);
  const roles = Object.entries(s.workers.live.reduce<Record<string, number>>((acc, w) => ({ ...acc, [w.role]: (acc[w.role] ?? 0) + 1 }), {}));
  const stale = s.workers.stale.map((w) => `  ${w.id} (last seen ${new Date(w.last_seen).toISOString()})${w.held.length ? `: held ${w.held.join(', ')} (they come back when their lock expires)` : ''}`);
  return [
    `run ${s.run.run_id} (${s.run.benchmark}, policy ${s.run.policy_model}, judge ${s.run.judge_model})`,
    `rows ${s.rows}/${s.run.total}${s.complete ? ' (complete)' : s.pending ? `; ${s.pending} job(s) still waiting or running` : ''}; scored ${s.scored}, correct ${s.correct}, accuracy ${acc}`,
    `masked: ${masked}`,
    `stop reasons: ${stops}`,
    ...s.warnings.map((w) => `WARNING: ${w}`),
    s.output ? `output: ${s.output.path} on host ${s.output.host} (results consumer ${s.output.worker ?? '?'})` : `output: ${s.run.output_jsonl_fpath} (not opened yet: the results consumer resolves it under its own output_root)`,
    ...(s.reconciled ? [reconcileLine(s.reconciled)] : []),
    `workers: ${roles.length ? roles.map(([r, n]) => `${n} ${r}`).join(', ') : 'none running'}`,
    ...(stale.length ? ['workers that stopped heartbeating:', ...stale] : []),
    '',
    jobs,
  ].join('\n');
}

/** When the run was last reconciled after a lost Redis (a failover), and what that restored. */
function reconcileLine(r: NonNullable<RunStatus['reconciled']>): string {
  return `reconciled after a lost Redis at ${r.at}: ${r.restored_rows} row(s) put back from the output file, ${r.reproduced} lost rollout(s) produced again`;
}

/** Whether any worker will take the requeued jobs, and if not, how to start one. */
async function whoPicksThemUp(redis: Redis, prefix: string, runId: string): Promise<string> {
  const run = await new RunStore(redis, prefix).requireRun(runId);
  const { live } = await listWorkers(redis, prefix);
  const roles = [...new Set(live.filter((w) => w.scope === run.queue_scope).map((w) => w.role))];
  if (roles.length) return `live workers (${roles.join(', ')}) pick them up now`;
  const how = run.queue_scope === null ? 'vcfleet worker sandbox|judge|results' : `vcfleet run --run-id ${runId}`;
  return `no worker is running: start one (${how})`;
}

export function registerOps(program: Command, cli: Cli): void {
  program
    .command('status')
    .description('counts of a run by outcome, and its jobs by queue and state')
    .requiredOption('--run-id <id>', 'the run')
    .option('--config <path>', 'config YAML')
    .option('--json', 'print JSON instead of a table')
    .action(async (opts: { config?: string; runId: string; json?: boolean }) => {
      const { config, logger } = cli.context(opts);
      const redis = await connect(config, logger, 'client');
      try {
        const s = await runStatus(redis, config.queues.prefix, opts.runId);
        process.stdout.write(opts.json ? `${JSON.stringify(s, null, 2)}\n` : `${formatStatus(s)}\n`);
        if (!s.complete && Object.values(s.jobs).some((j) => j.failed > 0)) {
          process.stdout.write(`\nfailed jobs can be requeued: vcfleet retry --run-id ${opts.runId}\n`);
        }
      } finally {
        redis.disconnect();
      }
    });

  program
    .command('retry')
    .description('requeue the failed jobs of a run, with their attempts reset')
    .requiredOption('--run-id <id>', 'the run')
    .option('--stage <stage>', 'rollout, judge or results (default: all three)')
    .option('--config <path>', 'config YAML')
    .action(async (opts: { config?: string; runId: string; stage?: string }) => {
      if (opts.stage && !['rollout', 'judge', 'results'].includes(opts.stage)) throw new ConfigError(`--stage must be rollout, judge or results, not "${opts.stage}"`);
      const stages: QueueName[] = opts.stage ? [opts.stage as QueueName] : ['rollout', 'judge', 'results'];
      const { config, logger } = cli.context(opts);
      const redis = await connect(config, logger, 'client');
      try {
        const n = await retryFailed(redis, config.queues.prefix, opts.runId, stages, logger);
        process.stdout.write(`requeued ${n} failed job(s) of run ${opts.runId}; ${await whoPicksThemUp(redis, config.queues.prefix, opts.runId)}\n`);
      } finally {
        redis.disconnect();
      }
    });

  program
    .command('rejudge')
    .description('send the judge_failed rows of a run back to the judge (the agent is not run again)')
    .requiredOption('--run-id <id>', 'the run')
    .option('--config <path>', 'config YAML')
    .action(async (opts: { config?: string; runId: string }) => {
      const { config, logger } = cli.context(opts);
      const redis = await connect(config, logger, 'client');
      try {
        const { sent, missing } = await rejudge(redis, config.queues.prefix, opts.runId, logger, config.queues);
        process.stdout.write(`sent ${sent} judge_failed row(s) of run ${opts.runId} back to the judge${missing ? `; ${missing} had no kept outcome (retry them with --stage rollout)` : ''}\n`);
      } finally {
        redis.disconnect();
      }
    });
}
