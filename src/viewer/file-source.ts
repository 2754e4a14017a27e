/**
 * The viewer's data from files: an output JSONL (rows of one or more runs), its
 * fleet metrics file (`<stem>_fleet_metrics.json`, or an older run's: output-files.ts; for the run's number of repeats), and `<stem>_transcripts/`
 * with its `images/`. The JSONL is read again whenever its size or modification time changes, so a
 * file still being written by a results consumer shows its new rows on reload.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { DataError } from '../shared/errors.ts';
import type { Row } from '../shared/records/rows.ts';
import { aggregateMetrics } from '../shared/output/metrics.ts';
import { fleetMetricsToRead } from '../shared/output/output-files.ts';
import { parseRowFile, type ParsedRows } from '../shared/output/row-file.ts';
import { runListEntry } from './run-list.ts';
import type { RolloutData, RunData, RunMeta, ViewerSource } from './source.ts';
import { outputFiles } from './transcript-files.ts';

interface Loaded {
  mtimeMs: number;
  size: number;
  parsed: ParsedRows;
  /** `num_repeats` of the metrics file, when it belongs to that run. */
  metricsRepeats: { runId: string; numRepeats: number } | null;
}

function readMetricsRepeats(jsonlPath: string): Loaded['metricsRepeats'] {
  const file = fleetMetricsToRead(jsonlPath);
  if (!existsSync(file)) return null;
  try {
    const value = JSON.parse(readFileSync(file, 'utf8')) as { run_id?: unknown; num_repeats?: unknown };
    if (typeof value.run_id !== 'string' || !Number.isInteger(value.num_repeats) || (value.num_repeats as number) < 1) return null;
    return { runId: value.run_id, numRepeats: value.num_repeats as number };
  } catch {
    // A metrics file being rewritten or damaged: the rows still give the repeats.
    return null;
  }
}

function runMeta(runId: string, rows: readonly Row[], loaded: Loaded, jsonlPath: string, duplicates: readonly string[]): RunMeta {
  const first = rows[0];
  const inferred = rows.reduce((most, r) => Math.max(most, r.repeat + 1), 1);
  const fromFile = loaded.metricsRepeats?.runId === runId ? loaded.metricsRepeats.numRepeats : 0;
  const problems = [...loaded.parsed.problems];
  if (duplicates.length) {
    problems.push(`rollouts on more than one line (the last line stands): ${duplicates.length}, e.g. ${duplicates[0]}`);
  }
  return {
    run_id: runId,
    benchmark: first.benchmark,
    policy_model: first.policy_model,
    judge_model: rows.find((r) => r.judge_model !== null)?.judge_model ?? null,
    num_repeats: Math.max(inferred, fromFile),
    origin: jsonlPath,
    problems,
  };
}

/** A `ViewerSource` over one output JSONL and the folders beside it. Throws DataError when the file cannot be read. */
export function createFileSource(jsonlPath: string): ViewerSource {
  const file = path.resolve(jsonlPath);
  const files = outputFiles(file);
  let cache: Loaded | undefined;

  function load(): Loaded {
    let stat;
    try {
      stat = statSync(file);
    } catch (err) {
      throw new DataError(`cannot read ${file}: ${(err as Error).message}`);
    }
    if (cache && cache.mtimeMs === stat.mtimeMs && cache.size === stat.size) return cache;
    const parsed = parseRowFile(file);
    cache = { mtimeMs: stat.mtimeMs, size: stat.size, parsed, metricsRepeats: readMetricsRepeats(file) };
    return cache;
  }

  load();
  return {
    async runs() {
      const entries = [...load().parsed.runs].map(([runId, { rows }]) => runListEntry({ run_id: runId, benchmark: rows[0].benchmark, policy_model: rows[0].policy_model }, rows));
      return entries.sort((a, b) => b.last_finished_at.localeCompare(a.last_finished_at));
    },
    async run(runId): Promise<RunData | null> {
      const loaded = load();
      const run = loaded.parsed.runs.get(runId);
      if (!run) return null;
      const meta = runMeta(runId, run.rows, loaded, file, run.duplicates);
      return { meta, rows: run.rows, metrics: aggregateMetrics(run.rows, meta.num_repeats) };
    },
    async rollout(runId, rolloutId): Promise<RolloutData | null> {
      const row = load().parsed.runs.get(runId)?.rows.find((r) => r.rollout_id === rolloutId);
      return row ? { row, transcript: files.transcript(row), token_capture: files.tokenCapture(row) } : null;
    },
    async image(sha256) {
      return files.image(sha256);
    },
  };
}
