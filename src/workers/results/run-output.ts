/**
 * The output of one run: its JSONL (one row per rollout) and `<stem>_fleet_metrics.json` (output-files.ts).
 * Redis holds the rows of record; the file is kept equal to them. On open the file is reconciled:
 * a line cut by a crash is dropped, rows Redis has and the file lacks are appended, rows only the
 * file has are put back into Redis. A replaced row (a rejudge, a retried rollout) updates the
 * metrics at once and marks the file stale; the file is rewritten from Redis, atomically, at most
 * once a second (less often when a rewrite takes long: see flush) and at close, so a rejudge of a
 * thousand rows rewrites the file a few times, not a thousand. A crash in between leaves the old row in the
 * file, which the next open finds differs from Redis and rewrites.
 */
import { closeSync, existsSync, mkdirSync, openSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { InfraError } from '../../shared/errors.ts';
import type { Logger } from '../../shared/logger.ts';
import { shouldReplace, type Row } from '../../shared/records/rows.ts';
import { readRowFile } from '../../shared/output/row-file.ts';
import type { RunRecord, RunStore } from '../../shared/stores/run-store.ts';
import { metricRowOf, metricsPathFor, MetricsAccumulator } from '../../shared/output/metrics.ts';
import { pricingOf } from '../../shared/output/run-pricing.ts';
import { identityFromRecord, laterTime, metricsFile } from '../../shared/output/run-identity.ts';

export type CommitResult = 'new' | 'duplicate' | 'replaced';

function writeError(file: string, err: unknown): InfraError {
  const code = (err as NodeJS.ErrnoException).code ?? '';
  return new InfraError(
    `cannot write ${file} (${code || (err as Error).message}): make its folder exist and be writable, or free disk space ` +
      '(the path is fixed when the run is produced); the rows are safe in Redis and are written when the results consumer runs again',
    { cause: err },
  );
}

export class RunOutput {
  readonly runId: string;
  readonly metricsPath: string;
  private fd: number | undefined;
  /** Rollouts whose row is in the file (ids only: the metrics are kept incrementally). */
  private readonly inFile = new Set<string>();
  private metrics = new MetricsAccumulator();
  /** The latest `finished_at` of the rows in the file (the end of the run so far). */
  private lastFinish: string | null = null;
  private metricsDirty = false;
  /** Rows were replaced in Redis (and the metrics) since the file was last written whole. */
  private stale = false;
  /** How often the file was rewritten whole, and the bytes written to it (for the benchmark and logs). */
  readonly writes = { rewrites: 0, bytes: 0 };
  /** When the last whole rewrite ended, and how long it took (ms): the next waits ten times that, at least a second. */
  private lastRewrite = { at: 0, ms: 0 };
  /** Commits run one at a time (the worker may hold several jobs), so file and metrics stay in step. */
  private queue: Promise<unknown> = Promise.resolve();

  /** `run`: the run record, whose id, repeats and identity (models, settings hash, start) the metrics file records. */
  constructor(
    private readonly run: RunRecord,
    readonly jsonlPath: string,
    private readonly store: RunStore,
    private readonly logger: Logger,
  ) {
    this.runId = run.run_id;
    this.metricsPath = metricsPathFor(jsonlPath);
  }

  get rowCount(): number {
    return this.inFile.size;
  }

  /** Reconcile the file with Redis. */
  async open(): Promise<void> {
    try {
      mkdirSync(path.dirname(this.jsonlPath), { recursive: true });
    } catch (err) {
      throw writeError(this.jsonlPath, err);
    }
    const fromFile = this.readFile();
    const merged = new Map<string, Row>();
    let rewrite = fromFile.damaged;
    for await (const row of this.store.scanRows(this.runId)) {
      merged.set(row.rollout_id, row);
      const inFile = fromFile.rows.get(row.rollout_id);
      if (inFile && JSON.stringify(inFile) !== JSON.stringify(row)) rewrite = true;
    }
    for (const [id, row] of fromFile.rows) {
      if (merged.has(id)) continue;
      await this.store.putRow(row);
      merged.set(id, row);
      this.logger.warn({ rollout_id: id }, 'row found in the output file but not in Redis; put back into Redis');
    }
    if (rewrite) this.rewrite(merged.values());
    else {
      for (const row of fromFile.rows.values()) this.track(row);
      for (const row of merged.values()) if (!this.inFile.has(row.rollout_id)) this.append(row);
    }
    this.metricsDirty = true;
    this.logger.info({ run_id: this.runId, file: this.jsonlPath, rows: this.inFile.size, rewrote: rewrite }, 'output file reconciled');
  }

  private readFile(): { rows: Map<string, Row>; damaged: boolean } {
    const parsed = readRowFile(this.jsonlPath);
    const other = [...parsed.runs.keys()].find((id) => id !== this.runId);
    if (other !== undefined) return this.moveAside(other);
    const mine = parsed.runs.get(this.runId);
    const rows = new Map((mine?.rows ?? []).map((r) => [r.rollout_id, r] as const));
    const damaged = parsed.cutTail || parsed.problems.length > 0 || (mine?.duplicates.length ?? 0) > 0;
    if (damaged) this.logger.warn({ file: this.jsonlPath }, 'output file had a cut, foreign or duplicate line; rewriting it from Redis');
    return { rows, damaged };
  }

  /** The file holds another run's rows: keep them, under a new name, and start this run's file afresh. */
  private moveAside(otherRun: string): { rows: Map<string, Row>; damaged: boolean } {
    const aside = `${this.jsonlPath}.${otherRun}.${Date.now()}.bak`;
    try {
      renameSync(this.jsonlPath, aside);
      if (existsSync(this.metricsPath)) renameSync(this.metricsPath, `${this.metricsPath}.${otherRun}.${Date.now()}.bak`);
    } catch (err) {
      throw writeError(this.jsonlPath, err);
    }
    this.logger.warn({ file: this.jsonlPath, movedTo: aside, otherRun }, `the output file held rows of run ${otherRun}; moved it aside`);
    return { rows: new Map(), damaged: false };
  }

  /** Record a row: Redis first (the record), then the file. Duplicate deliveries change nothing. */
  /**
   * Put back into Redis every row of this run the file holds and Redis lacks (a failover lost the
   * writes the old primary acknowledged last); in turn with commits. Returns how many were put back.
   */
  restoreFromFile(): Promise<number> {
    const next = this.queue.then(async () => {
      const mine = readRowFile(this.jsonlPath).runs.get(this.runId);
      let restored = 0;
      for (const row of mine?.rows ?? []) if (await this.store.putRowIfAbsent(row)) restored++;
      return restored;
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  commit(row: Row): Promise<CommitResult> {
    const next = this.queue.then(() => this.commitNow(row));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async commitNow(row: Row): Promise<CommitResult> {
    if (await this.store.putRowIfAbsent(row)) {
      this.append(row);
      return 'new';
    }
    const existing = await this.store.getRow(row.run_id, row.rollout_id);
    if (existing && !shouldReplace(existing, row)) {
      // Stored by an earlier delivery whose file write failed: write it now.
      if (!this.inFile.has(existing.rollout_id)) this.append(existing);
      return 'duplicate';
    }
    await this.store.putRow(row);
    if (existing && this.inFile.has(row.rollout_id)) {
      // The metrics now; the file at the next flush (rewritten from Redis, which holds the new row).
      this.metrics.remove(metricRowOf(existing));
      this.metrics.add(metricRowOf(row));
      this.lastFinish = laterTime(this.lastFinish, row.finished_at);
      this.metricsDirty = true;
      this.stale = true;
      return 'replaced';
    }
    this.append(row);
    return existing ? 'replaced' : 'new';
  }

  /**
   * Rewrite the file from Redis if rows were replaced since it was last written (in turn with the
   * commits). Unless `force`, only once the last rewrite is ten times its own length ago (at least a
   * second): rewriting a large file then takes at most a tenth of the consumer's time.
   */
  flush(force = true): Promise<void> {
    if (!force && Date.now() - this.lastRewrite.at < Math.max(1000, 10 * this.lastRewrite.ms)) return Promise.resolve();
    const next = this.queue.then(() => this.flushNow());
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async flushNow(): Promise<void> {
    if (!this.stale) return;
    const started = Date.now();
    // Streamed from Redis to a file beside it, then renamed over the old one: readers see one or the other.
    const tmp = `${this.jsonlPath}.tmp-${process.pid}`;
    const metrics = new MetricsAccumulator();
    const ids = new Set<string>();
    let lastFinish: string | null = null;
    let bytes = 0;
    let fd: number | undefined;
    try {
      fd = openSync(tmp, 'w');
      for await (const r of this.store.scanRows(this.runId)) {
        const line = `${JSON.stringify(r)}\n`;
        writeSync(fd, line);
        bytes += Buffer.byteLength(line);
        ids.add(r.rollout_id);
        metrics.add(metricRowOf(r));
        lastFinish = laterTime(lastFinish, r.finished_at);
      }
      closeSync(fd);
      fd = undefined;
      this.closeFile();
      renameSync(tmp, this.jsonlPath);
    } catch (err) {
      if (fd !== undefined) closeSync(fd);
      rmSync(tmp, { force: true });
      throw writeError(this.jsonlPath, err);
    }
    this.inFile.clear();
    for (const id of ids) this.inFile.add(id);
    this.metrics = metrics;
    this.lastFinish = lastFinish;
    this.metricsDirty = true;
    this.stale = false;
    this.writes.rewrites++;
    this.writes.bytes += bytes;
    this.lastRewrite = { at: Date.now(), ms: Date.now() - started };
  }

  private track(row: Row): void {
    this.inFile.add(row.rollout_id);
    this.metrics.add(metricRowOf(row));
    this.lastFinish = laterTime(this.lastFinish, row.finished_at);
    this.metricsDirty = true;
  }

  private append(row: Row): void {
    try {
      this.fd ??= openSync(this.jsonlPath, 'a');
      const line = `${JSON.stringify(row)}\n`;
      writeSync(this.fd, line);
      this.writes.bytes += Buffer.byteLength(line);
    } catch (err) {
      throw writeError(this.jsonlPath, err);
    }
    this.track(row);
  }

  private rewrite(rows: Iterable<Row>): void {
    const tmp = `${this.jsonlPath}.tmp-${process.pid}`;
    const list = [...rows];
    try {
      const text = list.map((r) => `${JSON.stringify(r)}\n`).join('');
      writeFileSync(tmp, text);
      this.writes.rewrites++;
      this.writes.bytes += Buffer.byteLength(text);
      this.closeFile();
      renameSync(tmp, this.jsonlPath);
    } catch (err) {
      throw writeError(this.jsonlPath, err);
    }
    this.inFile.clear();
    this.metrics = new MetricsAccumulator();
    this.lastFinish = null;
    for (const r of list) this.track(r);
  }

  /**
   * Rewrite the metrics file if rows changed since the last write (atomically): the metrics, and the
   * run's identity under `run` (run-identity.ts).
   */
  writeMetrics(force = false): void {
    if (!this.metricsDirty && !force) return;
    const metrics = metricsFile(identityFromRecord(this.run, this.lastFinish), this.metrics.result(this.run.num_repeats, pricingOf(this.run)));
    const tmp = `${this.metricsPath}.tmp-${process.pid}`;
    try {
      writeFileSync(tmp, `${JSON.stringify(metrics, null, 2)}\n`);
      renameSync(tmp, this.metricsPath);
    } catch (err) {
      throw writeError(this.metricsPath, err);
    }
    this.metricsDirty = false;
  }

  private closeFile(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  /** The last flush, then the metrics file; the file is closed either way. */
  async close(): Promise<void> {
    try {
      await this.flush();
      this.writeMetrics();
    } finally {
      this.closeFile();
    }
  }
}
