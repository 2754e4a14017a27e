/**
 * NeMo Gym's aggregate metrics of verify-response rows (gym-row.ts), in its shape: what serve's
 * `POST /aggregate_metrics` answers and what `<stem>_aggregate_metrics.json` holds (output-path.ts).
 * Pure.
 *
 * - Rows with `mask_sample: true` are left out (they belong with the failures, not the metrics).
 * - The rest are grouped by `agent_ref.name` (a row without one counts under `DEFAULT_AGENT_REF`),
 *   in the order the names first appear; the answer is a list, one entry per agent:
 *   `{agent_ref, agent_metrics, key_metrics, group_level_metrics}`.
 * - `agent_metrics`: for each top-level numeric or boolean field of the rows (`reward`,
 *   `string_match_reward`, `turns_used`, `finished_naturally`...; `_ng_*` keys and anything else
 *   left out; a boolean counts 1 or 0), `mean/<field>`, `max/<field>`, `min/<field>`,
 *   `median/<field>`, `std/<field>` (the population standard deviation), over the rows that have it.
 * - `key_metrics`: the headline, `mean/reward` (when the rows have a reward).
 * - `group_level_metrics`: the same statistics per task, one entry per `_ng_task_index` (ascending),
 *   with its `_ng_task_index` and `num_rollouts`; rows without a task index are in no group.
 */
import { DEFAULT_AGENT_REF } from './gym-request-fields.ts';

export interface GymAgentMetrics {
  agent_ref: { name: string; [key: string]: unknown };
  agent_metrics: Record<string, number>;
  key_metrics: Record<string, number>;
  group_level_metrics: Array<Record<string, number>>;
}

const STATS = ['mean', 'max', 'min', 'median', 'std'] as const;

/** The statistics of one field's values (never empty). */
function statsOf(values: readonly number[]): Record<(typeof STATS)[number], number> {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  const mean = sorted.reduce((a, b) => a + b, 0) / n;
  const median = n % 2 === 1 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  const std = Math.sqrt(sorted.reduce((a, v) => a + (v - mean) ** 2, 0) / n);
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
    for (const [key, value] of Object.entries(row)) {
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

/** NeMo Gym's aggregate metrics of `rows` (see the header). */
export function gymAggregateMetrics(rows: ReadonlyArray<Readonly<Record<string, unknown>>>): GymAgentMetrics[] {
  const agents = new Map<string, { ref: GymAgentMetrics['agent_ref']; rows: Array<Readonly<Record<string, unknown>>> }>();
  for (const row of rows) {
    if (row.mask_sample === true) continue;
    const ref = agentRefOf(row);
    const agent = agents.get(ref.name) ?? { ref, rows: [] };
    agent.rows.push(row);
    agents.set(ref.name, agent);
  }
  return [...agents.values()].map(({ ref, rows: mine }) => {
    const agentMetrics = fieldStats(mine);
    const byTask = new Map<number, Array<Readonly<Record<string, unknown>>>>();
    for (const row of mine) {
      const task = row._ng_task_index;
      if (typeof task !== 'number' || !Number.isInteger(task)) continue;
      const group = byTask.get(task) ?? [];
      group.push(row);
      byTask.set(task, group);
    }
    const groups = [...byTask.entries()].sort((a, b) => a[0] - b[0]).map(([task, group]) => ({ _ng_task_index: task, num_rollouts: group.length, ...fieldStats(group) }));
    const key: Record<string, number> = {};
    if (agentMetrics['mean/reward'] !== undefined) key['mean/reward'] = agentMetrics['mean/reward'];
    return { agent_ref: ref, agent_metrics: agentMetrics, key_metrics: key, group_level_metrics: groups };
  });
}
