/**
 * The files of `vcfleet export --format gym` beside its rows, as NeMo Gym's collector writes them so
 * that its readers (`compute_aggregate_metrics`, `gym eval aggregate`, resume, reverify) take them:
 * - each row carries `agent_ref` (`{name}`: `--agent-name`, default `DEFAULT_AGENT_REF`'s; the name the
 *   Gym config's agent has, since `gym eval aggregate` posts to it) and its routing keys `_ng_task_index` (a task's index, by the order
 *   its first row stands in the file) and `_ng_rollout_index` (its repeat; the next free index when
 *   another row of the task has it, so no two rows share both);
 * - rows with `mask_sample: true` go to `<stem>_failures.jsonl`, not the rows file;
 * - `<stem>_materialized_inputs.jsonl`: one line per row, as the collector materializes its input
 *   rows (each task repeated, with its `_ng_task_index` and `_ng_rollout_index`: resume and reverify
 *   pair inputs and rollouts by both);
 * - `<stem>_aggregate_metrics.json`: NeMo Gym's aggregate metrics of all rows (gym-metrics.ts), from
 *   a slim copy of each row (its numbers and routing keys), so memory does not grow with responses.
 * `<stem>` is the output's name without `.jsonl` (output-files.ts). Each file is written beside its
 * name and renamed into place by `finish`; `abort` removes them.
 */
import { createWriteStream, renameSync, rmSync, writeFileSync, type WriteStream } from 'node:fs';
import { once } from 'node:events';
import { gymAggregateMetrics } from '../shared/output/gym-metrics.ts';
import { DEFAULT_AGENT_REF, ROUTING_KEYS, type GymRequestFields } from '../shared/output/gym-request-fields.ts';
import type { GymRow } from '../shared/output/gym-row.ts';
import { outputFiles } from '../shared/output/output-files.ts';
import type { Row } from '../shared/records/rows.ts';

/** A row's fields the metrics read: its numbers and booleans, `agent_ref`, `_ng_task_index`, `mask_sample`. */
function slim(record: GymRow): Record<string, unknown> {
  const out: Record<string, unknown> = { agent_ref: record.agent_ref, _ng_task_index: record._ng_task_index };
  for (const [k, v] of Object.entries(record)) if (typeof v === 'number' || typeof v === 'boolean') out[k] = v;
  return out;
}

class TmpFile {
  readonly tmp: string;
  readonly stream: WriteStream;
  constructor(readonly file: string) {
    this.tmp = `${file}.tmp-${process.pid}`;
    this.stream = createWriteStream(this.tmp);
  }
  async line(value: unknown): Promise<void> {
    if (!this.stream.write(`${JSON.stringify(value)}\n`)) await once(this.stream, 'drain');
  }
  async close(): Promise<void> {
    this.stream.end();
    await once(this.stream, 'finish');
  }
}

export class GymFiles {
  readonly files;
  private readonly failures: TmpFile;
  private readonly inputs: TmpFile;
  private readonly tasks = new Map<string, { index: number; rollouts: Set<number> }>();
  private readonly metricRows: Array<Record<string, unknown>> = [];
  /** Rows written to the failures file. */
  failed = 0;

  private readonly agentRef: { name: string };

  constructor(out: string, agentName: string = DEFAULT_AGENT_REF.name) {
    this.agentRef = { name: agentName };
    this.files = outputFiles(out);
    this.failures = new TmpFile(this.files.failures);
    this.inputs = new TmpFile(this.files.materializedInputs);
  }

  /** The request fields of a row with Gym's routing keys and `agent_ref`; its materialized input is written. */
  async route(row: Row, request: GymRequestFields): Promise<GymRequestFields> {
    let task = this.tasks.get(row.task_id);
    if (!task) {
      task = { index: this.tasks.size, rollouts: new Set() };
      this.tasks.set(row.task_id, task);
    }
    let rollout = request._ng_rollout_index ?? 0;
    if (task.rollouts.has(rollout)) rollout = Math.max(...task.rollouts) + 1;
    task.rollouts.add(rollout);
    const routed: GymRequestFields = { ...request, _ng_task_index: task.index, _ng_rollout_index: rollout, extras: { ...request.extras, agent_ref: { ...this.agentRef } } };
    const input: Record<string, unknown> = { responses_create_params: routed.responses_create_params, expected_answer: routed.expected_answer };
    for (const key of ROUTING_KEYS) if (routed[key] !== undefined) input[key] = routed[key];
    input.agent_ref = { ...this.agentRef };
    await this.inputs.line(input);
    return routed;
  }

  /** Keep a built row for the metrics; a masked one goes to the failures file (true: the caller writes it to the rows file). */
  async take(record: GymRow): Promise<boolean> {
    this.metricRows.push(slim(record));
    if (!record.mask_sample) return true;
    this.failed++;
    await this.failures.line(record);
    return false;
  }

  async finish(): Promise<void> {
    await Promise.all([this.failures.close(), this.inputs.close()]);
    const metricsTmp = `${this.files.gymMetrics}.tmp-${process.pid}`;
    writeFileSync(metricsTmp, `${JSON.stringify(gymAggregateMetrics(this.metricRows), null, 2)}\n`);
    renameSync(this.failures.tmp, this.files.failures);
    renameSync(this.inputs.tmp, this.files.materializedInputs);
    renameSync(metricsTmp, this.files.gymMetrics);
  }

  abort(): void {
    for (const f of [this.failures, this.inputs]) {
      f.stream.destroy();
      rmSync(f.tmp, { force: true });
    }
    rmSync(`${this.files.gymMetrics}.tmp-${process.pid}`, { force: true });
  }
}
