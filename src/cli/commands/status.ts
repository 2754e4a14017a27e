/** `vcfleet status`: a run's counts, workers and jobs, from any host with REDIS_URL (retry and rejudge: retry-rejudge.ts). */
import { terminalText } from '../../shared/text/terminal-text.ts';
import type { Command } from 'commander';
import { QUEUE_NAMES } from '../../shared/queue/registry.ts';
import type { Cli } from '../context.ts';
import { connectToRun } from '../run-redis.ts';
import { table } from '../runtime.ts';
import { servingOf, unservedText } from '../../ops/serving.ts';
import { WORKER_ROLES } from '../../workers/roles.ts';
import { runStatus, type RunStatus } from '../../ops/run-status.ts';
import { JOB_STATES } from '../../shared/queue/run-jobs.ts';
import { paceLines } from '../../pacing/index.ts';
import { vcfleetCommand } from '../../shared/text/advice.ts';
import { paperTableLines } from '../../shared/output/paper-table.ts';
import { publishedLines, readPublishedResults, type PublishedRow } from '../../shared/output/published-results.ts';
import { stallsLine } from '../../shared/queue/stall-record.ts';
import { runSettings } from '../../shared/stores/run-store.ts';

/** The paper's table of the rows so far, with the published rows beside it. */
function paperText(s: RunStatus, published: readonly PublishedRow[]): string[] {
  if (!s.paper || s.rows === 0) return [];
  // A serve run: one table per weight version (each step's weights are another policy), cancelled rollouts apart.
  if (s.by_weight_version) {
    return s.by_weight_version.flatMap((v) => {
      const passes = `${v.paper.passes} pass${v.paper.passes === 1 ? '' : 'es'}`;
      const cancelled = v.cancelled ? `; ${v.cancelled} cancelled, left out` : '';
      const head = `weight version ${v.weight_version ?? '(none given)'} (${passes}, every rollout counted${cancelled})`;
      return ['', table(v.paper.rollouts === 0 ? [[head, 'no rollout but cancelled ones']] : paperTableLines(v.paper, head))];
    });
  }
  const passes = `${s.paper.passes} pass${s.paper.passes === 1 ? '' : 'es'}`;
  return ['', table([...paperTableLines(s.paper, `paper table (${passes}, every rollout counted)`), ...publishedLines(published)])];
}

function formatStatus(s: RunStatus, published: readonly PublishedRow[] = []): string {
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
    `judge cache: ${s.judge_cache_hits} verdict(s) from the cache, no judge call (the run's judge.cache=${runJudgeCache(s)})`,
    ...paperText(s, published),
    ...s.warnings.map((w) => `WARNING: ${w}`),
    s.output ? `output: ${s.output.path} on host ${s.output.host} (results consumer ${s.output.worker ?? '?'})` : `output: ${s.run.output_jsonl_fpath} (not opened yet: the results consumer resolves it under its own output_root)`,
    ...(s.reconciled ? [reconcileLine(s.reconciled)] : []),
    ...(s.serve ? [serveLine(s.serve)] : []),
    ...[stallsLine(s.stalls)].filter((l): l is string => l !== null),
    `workers: ${roles.length ? roles.map(([r, n]) => `${n} ${r}`).join(', ') : 'none running'}`,
    ...(stale.length ? ['workers that stopped heartbeating:', ...stale] : []),
    ...paceLines(s.policy_pace),
    '',
    jobs,
  ].join('\n');
}

/** The run's `judge.cache` setting. */
function runJudgeCache(s: RunStatus): boolean {
  return runSettings(s.run).judge.cache;
}

/** A serve run's bound: requests pending now and those refused for it. */
function serveLine(p: NonNullable<RunStatus['serve']>): string {
  const mib = Math.round((p.image_bytes / 1024 / 1024) * 10) / 10;
  return `serve: ${p.pending} request(s) pending (${mib} MiB of images); refused ${p.refused.max_pending} at serve.max_pending, ${p.refused.image_budget} at serve.max_pending_image_mib`;
}

/** When the run was last reconciled after a lost Redis (a failover), and what that restored. */
function reconcileLine(r: NonNullable<RunStatus['reconciled']>): string {
  return `reconciled after a lost Redis at ${r.at}: ${r.restored_rows} row(s) put back from the output file, ${r.reproduced} lost rollout(s) produced again${r.lost_requests ? `, ${r.lost_requests} accepted request(s) lost with their records (their clients POST them again)` : ''}`;
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
      const conn = await connectToRun(config, logger, opts.runId);
      const redis = conn.redis;
      try {
        const s = await runStatus(redis, config.queues.prefix, opts.runId);
        process.stdout.write(opts.json ? `${JSON.stringify(s, null, 2)}\n` : `${terminalText(formatStatus(s, readPublishedResults(config.report.published_results)))}\n`);
        if (opts.json) return;
        if (s.pending > 0) {
          const serving = await servingOf(redis, config.queues.prefix, s.run);
          if (WORKER_ROLES.some((r) => !serving.byRole.has(r))) process.stdout.write(terminalText(`\n${s.pending} job(s) queued; ${unservedText(s.run, serving)}\n`));
        }
        if (!s.complete && Object.values(s.jobs).some((j) => j.failed > 0)) {
          process.stdout.write(`\nfailed jobs can be requeued: ${vcfleetCommand(`retry --run-id ${opts.runId}`)}\n`);
        }
      } finally {
        await conn.close();
      }
    });
}
