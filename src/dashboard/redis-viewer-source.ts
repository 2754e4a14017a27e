/**
 * The rollout viewer's data from the fleet's Redis, so the dashboard shows live runs with the same
 * pages as `vcfleet view`: runs from the run records, rows and metrics from the rows of record, and
 * each rollout's transcript from the run's output folder on this host (the JSONL path as this host
 * resolves it, like a results consumer here would; see output-path.ts). A transcript that is not on
 * this host gets the viewer's "missing" page naming the path looked for.
 *
 * Images: from the transcripts folders of the listed runs on this host first (the crops a model
 * read exist only there), else the puzzle image from Redis, checked against its SHA-256.
 */
import { errorMessage } from '../shared/errors.ts';
import type { Row } from '../shared/records/rows.ts';
import type { RunRecord, RunStore } from '../shared/stores/run-store.ts';
import { aggregateMetrics } from '../shared/output/metrics.ts';
import { pricingOf } from '../shared/output/run-pricing.ts';
import { unservedNotice } from '../ops/serving.ts';
import { resolveOutputPath, type OutputHostSettings } from '../shared/output/output-path.ts';
import { runListEntry } from '../viewer/run-list.ts';
import type { RolloutData, RunData, RunListEntry, RunMeta, TranscriptLookup, ViewerSource } from '../viewer/source.ts';
import { outputFiles, type OutputFiles } from '../viewer/transcript-files.ts';

export interface RedisViewerSourceOptions {
  /** Run records, rows and puzzle images. A store with `cache: true` reads each run record once. */
  store: RunStore;
  /** This host's `output_root` and `output_jsonl_fpath`: where a run's JSONL is found here. */
  output: OutputHostSettings;
  /** The most recent runs listed, and searched for images (default 50, as `dashboard.max_runs`). */
  maxRuns?: number;
}

/** A run's output files on this host, or why this host does not read them. */
type RunOutput = { files: OutputFiles } | { refused: string };

const collator = new Intl.Collator('en', { numeric: true });

/** HSCAN returns rows in no order: task id (as numbers), then repeat, as the viewer's table sorts. */
function byTask(a: Row, b: Row): number {
  return collator.compare(a.task_id, b.task_id) || a.repeat - b.repeat;
}

export function createRedisViewerSource(opts: RedisViewerSourceOptions): ViewerSource {
  const { store } = opts;
  const maxRuns = opts.maxRuns ?? 50;

  /** Ids come from URLs: a run is read only when the run index holds its id. */
  async function knownRun(runId: string): Promise<RunRecord | null> {
    if ((await store.redis.zscore(store.keys.runs(), runId)) === null) return null;
    return store.getRun(runId);
  }

  function outputOf(run: RunRecord): RunOutput {
    try {
      return { files: outputFiles(resolveOutputPath(run.run_id, run.output_jsonl_fpath, opts.output)) };
    } catch (err) {
      return { refused: errorMessage(err) };
    }
  }

  /** The run's rows in Redis's order (a run's page sorts them by task; the run list does not need to). */
  async function rowsOf(runId: string): Promise<Row[]> {
    const rows: Row[] = [];
    for await (const row of store.scanRows(runId)) rows.push(row);
    return rows;
  }

  function meta(run: RunRecord, out: RunOutput): RunMeta {
    const where = 'files' in out ? out.files.jsonl : run.output_jsonl_fpath;
    return {
      run_id: run.run_id,
      benchmark: run.benchmark,
      policy_model: run.policy_model,
      judge_model: run.judge_model,
      num_repeats: run.num_repeats,
      origin: `Redis prefix ${store.prefix}; output ${where}`,
      problems: 'refused' in out ? [`transcripts are not read on this host: ${out.refused}`] : [],
    };
  }

  function transcriptOf(run: RunRecord, row: Row): TranscriptLookup {
    if (row.transcript === null) return { status: 'not_kept' };
    const out = outputOf(run);
    if ('refused' in out) return { status: 'unreadable', looked_for: run.output_jsonl_fpath, problem: `not read on this host (${out.refused})` };
    return out.files.transcript(row);
  }

  return {
    async runs(): Promise<RunListEntry[]> {
      const entries: RunListEntry[] = [];
      // One run's rows at a time: a long list never holds every row of every run.
      for (const run of await store.recentRuns(maxRuns)) entries.push(runListEntry(run, await rowsOf(run.run_id)));
      return entries.sort((a, b) => b.last_finished_at.localeCompare(a.last_finished_at));
    },
    async run(runId): Promise<RunData | null> {
      const run = await knownRun(runId);
      if (!run) return null;
      const rows = (await rowsOf(runId)).sort(byTask);
      const notice = await unservedNotice(store.redis, store.prefix, run);
      return { meta: { ...meta(run, outputOf(run)), notices: notice ? [notice] : [] }, rows, metrics: aggregateMetrics(rows, run.num_repeats, pricingOf(run)) };
    },
    async rollout(runId, rolloutId): Promise<RolloutData | null> {
      const run = await knownRun(runId);
      const row = run && (await store.getRow(runId, rolloutId));
      if (!run || !row) return null;
      const out = outputOf(run);
      return { row, transcript: transcriptOf(run, row), token_capture: 'files' in out ? out.files.tokenCapture(row) : null };
    },
    async image(sha256) {
      for (const run of await store.recentRuns(maxRuns)) {
        const out = outputOf(run);
        const bytes = 'files' in out ? out.files.image(sha256) : null;
        if (bytes) return bytes;
      }
      // getBlob refuses bytes that do not hash to their name (a DataError: the app answers 500 with it).
      return (await store.hasBlob(sha256)) ? new Uint8Array(await store.getBlob(sha256)) : null;
    },
  };
}
