/**
 * `vcfleet export <jsonl> --format gym|tokens|steps [--out PATH]`: a run's rows as trainers read them
 * (export/run-export.ts): NeMo Gym verify-response rows, flat token records of the trajectories, or
 * one record per policy call.
 * Progress goes to stderr (a line redrawn on a terminal, a plain line every few seconds otherwise);
 * the summary line to stdout.
 */
import type { Command } from 'commander';
import { ConfigError } from '../../shared/errors.ts';
import { EXPORT_FORMATS, exportRun, summaryLine, type ExportFormat } from '../../export/run-export.ts';

interface ExportFlags {
  format?: string;
  out?: string;
  runId?: string;
  agentName?: string;
  includeMasked?: boolean;
  includePartial?: boolean;
}

function parseFormat(raw: string | undefined): ExportFormat {
  if (raw === undefined) throw new ConfigError(`--format is required: gym (NeMo Gym verify-response rows), tokens (flat token records) or steps (one record per policy call)`);
  if (!(EXPORT_FORMATS as readonly string[]).includes(raw)) throw new ConfigError(`--format must be gym, tokens or steps, not "${raw}"`);
  return raw as ExportFormat;
}

/** Throttled progress on `stream`: redrawn at most every 200 ms on a terminal, a line every 5 s otherwise. */
export function exportProgress(stream: { write(s: string): unknown; isTTY?: boolean }, now = () => Date.now()): { update(done: number, total: number): void; end(): void } {
  const every = stream.isTTY ? 200 : 5000;
  let last = now();
  let drawn = false;
  return {
    update(done, total) {
      if (now() - last < every) return;
      last = now();
      const text = `exporting: ${done} / ${total} rollouts (${Math.floor((100 * done) / Math.max(1, total))}%)`;
      stream.write(stream.isTTY ? `\r${text}` : `${text}\n`);
      drawn = true;
    },
    end() {
      if (drawn && stream.isTTY) stream.write('\n');
      drawn = false;
    },
  };
}

export function registerExport(program: Command): void {
  program
    .command('export')
    .description(
      'write the rows of a run as trainers read them: --format gym (NeMo Gym verify-response rows, one per row) or ' +
        '--format tokens (flat token records of the trajectories, for verl/SkyRL/Atropos-style loaders) or ' +
        '--format steps (one record per policy call: its prompt ids as the server saw them, generation ids, log-probabilities, the reward)',
    )
    .argument('<jsonl>', 'an output JSONL')
    .option('--format <format>', 'gym, tokens or steps')
    .option('--out <path>', 'where to write (default: <stem>.<format>.jsonl beside the JSONL)')
    .option('--run-id <id>', 'only this run of the file')
    .option('--agent-name <name>', "gym: the rows' agent_ref.name, the agent of the NeMo Gym config that reads them (default vcfleet_opencode_agent)")
    .option('--include-masked', 'tokens, steps: keep the records a trainer must not use, flagged mask_sample: true (default: skip them)')
    .option('--include-partial', 'tokens: keep the records whose flat form is only the contiguous prefix, flagged contiguous: false (default: skip them)')
    .action(async (file: string, opts: ExportFlags) => {
      const format = parseFormat(opts.format);
      const progress = exportProgress(process.stderr);
      try {
        const summary = await exportRun({ jsonl: file, format, out: opts.out, runId: opts.runId, agentName: opts.agentName, includeMasked: opts.includeMasked, includePartial: opts.includePartial, progress: progress.update });
        progress.end();
        for (const p of summary.problems) process.stderr.write(`${p}\n`);
        if (summary.problemCount > summary.problems.length) process.stderr.write(`... and ${summary.problemCount - summary.problems.length} more problems\n`);
        process.stdout.write(`${summaryLine(summary)}\n`);
      } finally {
        progress.end();
      }
    });
}
