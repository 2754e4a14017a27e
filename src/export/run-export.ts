/**
 * `vcfleet export`: a run's rows (and their transcripts and trajectories) as trainers read them, one
 * record per line: NeMo Gym's verify-response rows (`gym`), flat token records (`tokens`: only
 * contiguous ones unless asked) or per-call step records (`steps`: every answered call, chain or not),
 * built by shared/output/gym-row.ts, token-record.ts and step-records.ts. Streamed in two passes over the JSONL, a line at a
 * time: the first finds the line that stands for each rollout (the last one, as every reader of the
 * file takes it), the second builds and writes one record per standing row. Nothing is held but that
 * index, one row and its files. The output is written beside its final name and renamed into place at
 * the end.
 *
 * Every file is attacker-influenced: lines are bounded and parsed strictly, a rollout's files are read
 * through rollout-files.ts, and one bad line, record or image is a counted skip naming the rollout.
 */
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, renameSync, rmSync, statSync } from 'node:fs';
import { once } from 'node:events';
import path from 'node:path';
import { detectImageMime } from '../prepare/image-type.ts';
import { ConfigError, DataError } from '../shared/errors.ts';
import { benchmarkRequest } from '../shared/output/gym-request-fields.ts';
import { gymRow } from '../shared/output/gym-row.ts';
import { responseImageUrls } from '../shared/output/response-images.ts';
import { GymFiles } from './gym-files.ts';
import { tokenRecord } from '../shared/output/token-record.ts';
import { stepRecords } from '../shared/output/step-records.ts';
import { maskOf } from '../shared/output/training-mask.ts';
import type { Row } from '../shared/records/rows.ts';
import { jsonlLines } from '../shared/output/jsonl-lines.ts';
import { MAX_PROBLEMS, parseRowLine } from '../shared/output/row-file.ts';
import { RolloutFiles } from './rollout-files.ts';

export const EXPORT_FORMATS = ['gym', 'tokens', 'steps'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** A row's line is longer than this: not read (rows are a few KB). */
export const MAX_ROW_LINE_BYTES = 1024 * 1024;

export interface ExportOptions {
  /** The run's output JSONL. */
  jsonl: string;
  format: ExportFormat;
  /** Where to write; default `<stem>.gym.jsonl` / `<stem>.tokens.jsonl` beside the JSONL. */
  out?: string;
  /** Only this run of the file. */
  runId?: string;
  /** `gym`: the `agent_ref.name` of the rows (the agent of the Gym config that reads them). */
  agentName?: string;
  /** `tokens`: keep the records a trainer must not use, flagged `mask_sample: true` (default: skip them). */
  includeMasked?: boolean;
  /** `tokens`: keep the records whose flat form covers only a prefix (a broken chain, a capture cut at its bound), flagged `contiguous: false` (default: skip them; `steps` keeps every call). */
  includePartial?: boolean;
  /** Called after each standing row with the rows done and the rows in all. */
  progress?(done: number, total: number): void;
}

/** Why rows gave no record, by kind. */
export type SkipKind = 'bad_line' | 'no_transcript' | 'bad_transcript' | 'bad_image' | 'no_trajectory' | 'bad_trajectory' | 'missing_image' | 'masked' | 'partial';

export interface ExportSummary {
  format: ExportFormat;
  out: string;
  /** Rollouts of the file (one standing row each). */
  rows: number;
  /** Records written (`steps`: one per answered call). */
  written: number;
  /** Of the records written, those flagged `mask_sample` (tokens, steps: only with includeMasked; gym: none, they go to the failures file). */
  writtenMasked: number;
  /** `gym`: the failures file and how many masked rows it holds; null for the other formats. */
  failures: { file: string; rows: number } | null;
  /** `gym`: the other files written beside the rows (NeMo Gym's aggregate metrics, the materialized inputs). */
  gymFiles: string[];
  skipped: Partial<Record<SkipKind, number>>;
  /** Masked rows by reason (`judge_failed`, `chain_broken`, ...), written or skipped. */
  maskReasons: Record<string, number>;
  /** Lines that an earlier line of the same rollout's was replaced by (a rejudge, a retried rollout). */
  replacedLines: number;
  /** The first problems, each naming its line or rollout. */
  problems: string[];
  problemCount: number;
}

export function defaultOutPath(jsonl: string, format: ExportFormat): string {
  return path.join(path.dirname(jsonl), `${path.basename(jsonl).replace(/\.jsonl$/, '')}.${format}.jsonl`);
}

interface Standing {
  lineNo: number;
  transcript: boolean;
  trajectory: boolean;
}

class Tally {
  readonly skipped: Partial<Record<SkipKind, number>> = {};
  readonly maskReasons: Record<string, number> = {};
  readonly problems: string[] = [];
  problemCount = 0;

  skip(kind: SkipKind, problem?: string): void {
    this.skipped[kind] = (this.skipped[kind] ?? 0) + 1;
    if (problem === undefined) return;
    this.problemCount++;
    if (this.problems.length < MAX_PROBLEMS) this.problems.push(problem);
  }

  masked(reason: string): void {
    this.maskReasons[reason] = (this.maskReasons[reason] ?? 0) + 1;
  }
}

const short = (s: string) => (s.length > 200 ? `${s.slice(0, 200)}…` : s);

/** The index's key of a rollout: a digest, so a row's ids (up to a line's bound) cost the index a few bytes. */
const rolloutKey = (row: Row) => createHash('sha256').update(JSON.stringify([row.run_id, row.rollout_id])).digest('base64');

/** Pass 1: the standing line of each rollout (the last), and the problems of the lines that are not rows. */
function indexRows(jsonl: string, runId: string | undefined, tally: Tally): { standing: Map<string, Standing>; lines: number; runs: Set<string> } {
  const standing = new Map<string, Standing>();
  const runs = new Set<string>();
  let lines = 0;
  for (const line of jsonlLines(jsonl, MAX_ROW_LINE_BYTES)) {
    if ('tooLong' in line) {
      tally.skip('bad_line', `${jsonl} line ${line.lineNo}: longer than ${MAX_ROW_LINE_BYTES} bytes (${line.tooLong}); skipped`);
      continue;
    }
    const parsed = parseRowLine(line.text);
    if ('problem' in parsed) {
      tally.skip('bad_line', `${jsonl} line ${line.lineNo}: ${parsed.problem}; skipped`);
      continue;
    }
    const { row } = parsed;
    runs.add(row.run_id);
    if (runId !== undefined && row.run_id !== runId) continue;
    lines++;
    standing.set(rolloutKey(row), { lineNo: line.lineNo, transcript: row.transcript !== null, trajectory: row.trajectory !== null });
  }
  return { standing, lines, runs };
}

/** What one standing row gives: records to write (flagged masked or not), or nothing (the tally says why). */
type Built = { record: object; masked: boolean } | { records: object[]; masked: boolean } | null;

async function gymRecord(row: Row, files: RolloutFiles, tally: Tally, who: string, gym: GymFiles): Promise<Built> {
  if (row.transcript === null) return tally.skip('no_transcript'), null;
  const transcript = files.transcript({ ...row, transcript: row.transcript });
  if (!transcript.ok) return tally.skip('bad_transcript', `${who}: ${transcript.problem}; skipped`), null;
  const sha = transcript.value.task.image_sha256;
  const image = files.image(sha);
  if (!image.ok) return tally.skip('bad_image', `${who}: its puzzle ${image.problem}; skipped`), null;
  const mime = detectImageMime(image.value);
  if (mime === null) return tally.skip('bad_image', `${who}: its puzzle image ${sha.slice(0, 64)} is neither PNG nor JPEG; skipped`), null;
  let trajectory = null;
  if (row.trajectory !== null) {
    const read = files.trajectory({ ...row, trajectory: row.trajectory });
    if (!read.ok) return tally.skip('bad_trajectory', `${who}: ${read.problem}; skipped`), null;
    trajectory = read.value;
  }
  const request = await gym.route(row, benchmarkRequest(row, transcript.value, { mime, base64: image.value.toString('base64') }, trajectory?.calls[0]?.sampling ?? {}));
  const imageUrls = await responseImageUrls(files.jsonl, transcript.value);
  const record = gymRow({ row, transcript: transcript.value, trajectory, request, imageUrls });
  const mask = maskOf(row, trajectory);
  if (mask.reason !== null) tally.masked(mask.reason);
  // A masked row goes to the failures file, as NeMo Gym's collector routes it.
  if (!(await gym.take(record))) return { records: [], masked: true };
  return { record, masked: record.mask_sample };
}

function tokensRecord(row: Row, files: RolloutFiles, tally: Tally, who: string, o: ExportOptions): Built {
  if (row.trajectory === null) return tally.skip('no_trajectory'), null;
  const read = files.trajectory({ ...row, trajectory: row.trajectory });
  if (!read.ok) return tally.skip('bad_trajectory', `${who}: ${read.problem}; skipped`), null;
  const imagePath = (sha: string) => files.imagePath(sha);
  if (o.format === 'steps') {
    const steps = stepRecords(row, read.value, imagePath);
    if (!steps.ok) return tally.skip(steps.missingImage ? 'missing_image' : 'bad_trajectory', `${who}: ${steps.problem}; skipped`), null;
    const masked = steps.records[0]?.mask_sample ?? false;
    if (steps.records[0]?.mask_reason) tally.masked(steps.records[0].mask_reason);
    if (masked && !o.includeMasked) return tally.skip('masked'), null;
    return { records: steps.records, masked };
  }
  const built = tokenRecord(row, read.value, imagePath);
  if (!built.ok) return tally.skip(built.missingImage ? 'missing_image' : 'bad_trajectory', `${who}: ${built.problem}; skipped`), null;
  const { record } = built;
  if (record.mask_reason !== null) tally.masked(record.mask_reason);
  if (record.mask_sample && !o.includeMasked) return tally.skip('masked'), null;
  if (!record.contiguous && !o.includePartial) return tally.skip('partial'), null;
  return { record, masked: record.mask_sample };
}

function checkPaths(jsonl: string, out: string): void {
  if (!existsSync(jsonl)) throw new DataError(`${jsonl} does not exist: pass the output JSONL of a run (its output_jsonl_fpath)`);
  if (!statSync(jsonl).isFile()) throw new DataError(`${jsonl} is not a file: pass the output JSONL of a run (its output_jsonl_fpath)`);
  if (path.resolve(out) === path.resolve(jsonl)) throw new ConfigError(`--out ${out} is the run's own JSONL: name another file`);
  const dir = path.dirname(path.resolve(out));
  if (!existsSync(dir)) throw new ConfigError(`--out ${out}: its folder ${dir} does not exist`);
}

/** The problem that stops an export before it writes anything, or null. */
function nothingToExport(o: ExportOptions, jsonl: string, index: ReturnType<typeof indexRows>): string | null {
  if (index.lines === 0) {
    if (o.runId !== undefined && index.runs.size > 0) return `run ${o.runId} is not in ${jsonl}; it holds ${[...index.runs].join(', ')}`;
    return `${jsonl} holds no rows`;
  }
  const all = [...index.standing.values()];
  if (o.format !== 'gym' && !all.some((s) => s.trajectory)) {
    return `no row of ${jsonl} has a trajectory: token capture was off. Run with ++policy.token_capture=true (a vLLM policy server) to record them`;
  }
  if (o.format === 'gym' && !all.some((s) => s.transcript)) {
    return `no row of ${jsonl} has a transcript record, which the gym rows are built from: run with ++transcripts.enabled=true (the default)`;
  }
  return null;
}

export async function exportRun(o: ExportOptions): Promise<ExportSummary> {
  const jsonl = path.resolve(o.jsonl);
  const out = path.resolve(o.out ?? defaultOutPath(jsonl, o.format));
  checkPaths(jsonl, out);
  const tally = new Tally();
  const index = indexRows(jsonl, o.runId, tally);
  const stop = nothingToExport(o, jsonl, index);
  if (stop !== null) throw new DataError(stop);
  const files = new RolloutFiles(jsonl);
  const tmp = `${out}.tmp-${process.pid}`;
  const sink = createWriteStream(tmp);
  const gym = o.format === 'gym' ? new GymFiles(out, o.agentName) : null;
  const total = index.standing.size;
  let done = 0;
  let written = 0;
  let writtenMasked = 0;
  try {
    for (const line of jsonlLines(jsonl, MAX_ROW_LINE_BYTES)) {
      if ('tooLong' in line) continue;
      const parsed = parseRowLine(line.text);
      if ('problem' in parsed) continue;
      const { row } = parsed;
      if (index.standing.get(rolloutKey(row))?.lineNo !== line.lineNo) continue;
      const who = `rollout ${short(row.rollout_id)} (line ${line.lineNo})`;
      const built = gym ? await gymRecord(row, files, tally, who, gym) : tokensRecord(row, files, tally, who, o);
      for (const record of built ? ('records' in built ? built.records : [built.record]) : []) {
        written++;
        if (built!.masked) writtenMasked++;
        if (!sink.write(`${JSON.stringify(record)}\n`)) await once(sink, 'drain');
      }
      o.progress?.(++done, total);
    }
    sink.end();
    await once(sink, 'finish');
    await gym?.finish();
    renameSync(tmp, out);
  } catch (err) {
    sink.destroy();
    gym?.abort();
    rmSync(tmp, { force: true });
    throw err;
  }
  return {
    format: o.format, out, rows: total, written, writtenMasked, failures: gym ? { file: gym.files.failures, rows: gym.failed } : null,
    gymFiles: gym ? [gym.files.gymMetrics, gym.files.materializedInputs] : [], skipped: tally.skipped, maskReasons: tally.maskReasons,
    replacedLines: index.lines - total, problems: tally.problems, problemCount: tally.problemCount,
  };
}

const SKIP_WORDS: Record<SkipKind, string> = {
  bad_line: 'lines that are not rows',
  no_transcript: 'without a transcript',
  bad_transcript: 'with an unreadable transcript',
  bad_image: 'with an unreadable puzzle image',
  no_trajectory: 'without a trajectory',
  bad_trajectory: 'with an unusable trajectory',
  missing_image: 'with an image of its prompts missing from the transcripts\' images folder',
  masked: 'masked (mask_sample: a trainer must not use them; --include-masked keeps them flagged)',
  partial: 'not contiguous (a broken chain or a capture cut at its bound; --include-partial keeps the prefix flagged, --format steps keeps every call)',
};

/** The one summary line of an export, e.g. `wrote 380 gym rows of 388 rollouts to x.gym.jsonl; skipped ...`. */
export function summaryLine(s: ExportSummary): string {
  const what = s.format === 'gym' ? 'gym rows' : s.format === 'steps' ? 'step records' : 'token records';
  const flagged = s.writtenMasked > 0 ? ` (${s.writtenMasked} flagged mask_sample)` : '';
  const skipped = (Object.entries(s.skipped) as Array<[SkipKind, number]>).map(([k, n]) => `${n} ${SKIP_WORDS[k]}`);
  const reasons = Object.entries(s.maskReasons).map(([k, n]) => `${k} ${n}`).join(', ');
  return (
    `wrote ${s.written} ${what}${flagged} of ${s.rows} rollouts to ${s.out}` +
    (skipped.length ? `; skipped ${skipped.join(', ')}` : '; skipped none') +
    (reasons ? `; masked by reason: ${reasons}` : '') +
    (s.replacedLines > 0 ? `; ${s.replacedLines} earlier lines of rejudged or retried rollouts left out (the last line stands)` : '') +
    (s.failures ? `; ${s.failures.rows} masked rows to ${s.failures.file}; NeMo Gym's metrics and inputs to ${s.gymFiles.join(', ')}` : '')
  );
}
