/**
 * NeMo Gym's aggregate metrics of verify-response rows (gym-row.ts), in its shape and semantics
 * (`compute_aggregate_metrics` and its collector, read from NVIDIA-NeMo/Gym): what serve's
 * `POST /aggregate_metrics` answers (`aggregateMetrics`: one `{agent_metrics, key_metrics,
 * group_level_metrics}` over the rows posted, which the collector wraps with the agent's
 * `agent_ref`) and what `<stem>_aggregate_metrics.json` holds (`gymAggregateMetrics`: the list the
 * collector writes, one entry per agent with its `agent_ref`). Pure.
 *
 * - Rows with `mask_sample: true` are left out (they belong with the failures, not the metrics).
 * - The file's rows are grouped by `agent_ref.name` (a row without one counts under
 *   `DEFAULT_AGENT_REF`), in the order the names first appear.
 * - `agent_metrics`: for each top-level numeric or boolean field of the rows and of their
 *   `response.usage` (`reward`, `string_match_reward`, `turns_used`, `finished_naturally`,
 *   `input_tokens`...; `_ng_*` keys and anything else left out; a boolean counts 1 or 0),
 *   `mean/<field>`, `max/<field>`, `min/<field>`, `median/<field>`, `std/<field>` (the sample standard
 *   deviation, 0 for one value, as pandas gives it to Gym), over the rows that have it.
 * - `key_metrics`: every `mean/*` of `agent_metrics` (Gym's default headline).
 * - `group_level_metrics`: the same statistics per task, one entry per `_ng_task_index` (ascending),
 *   with its `_ng_task_index` and `num_rollouts`; a row without a task index counts as task 0 (as in
 *   Gym).
 */
import { DEFAULT_AGENT_REF } from './gym-request-fields.ts';

/** Gym's `AggregateMetrics`: what its agent server's `/aggregate_metrics` answers. */
export interface GymMetrics {
  agent_metrics: Record<string, number>;
  key_metrics: Record<string, number>;
  group_level_metrics: Array<Record<string, number>>;
}
/** One entry of `<stem>_aggregate_metrics.json`. */
export interface GymAgentMetrics extends GymMetrics {
  agent_ref: { name: string; [key: string]: unknown };
}

const STATS = ['mean', 'max', 'min', 'median', 'std'] as const;

/** The statistics of one field's values (never empty). */
function statsOf(values: readonly number[]): Record<(typeof STATS)[number], number> {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  const mean = sorted.reduce((a, b) => a + b, 0) / n;
  const median = n % 2 === 1 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  const std = n > 1 ? Math.sqrt(sorted.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1)) : 0;
  return { mean, max: sorted[n - 1], min: sorted[0], median, std };
}

/** A field's number: finite numbers as they are, booleans as 1 or 0; null for anything else. */
function numberOf(value: unknown): number | null {
  if (typeof value === 'boolean') return value ? 1 : 0;
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** `<stat>/<field>` of every numeric field of `rows`, fields in the order they first appear. */
export function fieldStats(rows: ReadonlyArray<Readonly<Record<string, unknown>>>): Record<string, number> {
  const values = new Map<string, number[]>();
  for (const row of rows) {
    const usage = (row.response as { usage?: unknown } | undefined)?.usage;
    const fields = { ...row, ...(usage !== null && typeof usage === 'object' ? usage : {}) };
    for (const [key, value] of Object.entries(fields)) {
      if (key.startsWith('_ng_')) continue;
      const n = numberOf(value);
      if (n === null) continue;
      const list = values.get(key) ?? [];
      list.push(n);
      values.set(key, list);
    }
  }
  const out: Record<string, number> = {};
  for (const [field, list] of values) {
    const s = statsOf(list);
    for (const stat of STATS) out[`${stat}/${field}`] = s[stat];
  }
  return out;
}

function agentRefOf(row: Readonly<Record<string, unknown>>): GymAgentMetrics['agent_ref'] {
  const ref = row.agent_ref;
  if (ref !== null && typeof ref === 'object' && typeof (ref as { name?: unknown }).name === 'string') return ref as GymAgentMetrics['agent_ref'];
  return { ...DEFAULT_AGENT_REF };
}

/** Gym's `AggregateMetrics` of `rows` as one agent's (see the header). */
export function aggregateMetrics(rows: ReadonlyArray<Readonly<Record<string, unknown>>>): GymMetrics {
  const mine = rows.filter((row) => row.mask_sample !== true);
  const agentMetrics = fieldStats(mine);
  const byTask = new Map<number, Array<Readonly<Record<string, unknown>>>>();
  for (const row of mine) {
    const task = typeof row._ng_task_index === 'number' && Number.isInteger(row._ng_task_index) ? row._ng_task_index : 0;
    const group = byTask.get(task) ?? [];
    group.push(row);
    byTask.set(task, group);
  }
  const groups = [...byTask.entries()].sort((a, b) => a[0] - b[0]).map(([task, group]) => ({ _ng_task_index: task, num_rollouts: group.length, ...fieldStats(group) }));
  const key = Object.fromEntries(Object.entries(agentMetrics).filter(([k]) => k.startsWith('mean/')));
  return { agent_metrics: agentMetrics, key_metrics: key, group_level_metrics: groups };
}

/** `<stem>_aggregate_metrics.json` of `rows`: one entry per agent (see the header). */
export function gymAggregateMetrics(rows: ReadonlyArray<Readonly<Record<string, unknown>>>): GymAgentMetrics[] {
  const agents = new Map<string, { ref: GymAgentMetrics['agent_ref']; rows: Array<Readonly<Record<string, unknown>>> }>();
  for (const row of rows) {
    if (row.mask_sample === true) continue;
    const ref = agentRefOf(row);
    const agent = agents.get(ref.name) ?? { ref, rows: [] };
    agent.rows.push(row);
    agents.set(ref.name, agent);
  }
  return [...agents.values()].map(({ ref, rows: mine }) => ({ agent_ref: ref, ...aggregateMetrics(mine) }));
}
