/**
 * NeMo Gym's aggregate metrics (shared/output/gym-metrics.ts) on rows made here: masked rows left out,
 * one entry per agent name, `<stat>/<field>` of the numeric and boolean fields (no `_ng_*` key), the
 * headline, per-task groups.
 */
import { describe, expect, it } from 'vitest';
import { aggregateMetrics, gymAggregateMetrics } from '../../../src/shared/output/gym-metrics.ts';

describe('gymAggregateMetrics', () => {
  it('leaves masked rows out, groups by agent_ref.name and by task, and gives each statistic', () => {
    const rows = [
      { agent_ref: { name: 'b' }, _ng_task_index: 1, _ng_rollout_index: 0, reward: 1, turns_used: 1, finished_naturally: true, failure_reason: null, response: { usage: { input_tokens: 9 } } },
      { agent_ref: { name: 'b' }, _ng_task_index: 0, _ng_rollout_index: 0, reward: 0, turns_used: 3, finished_naturally: false },
      { agent_ref: { name: 'b' }, _ng_task_index: 0, _ng_rollout_index: 1, reward: 1, turns_used: 8, finished_naturally: true },
      { agent_ref: { name: 'b' }, _ng_task_index: 2, reward: 0, turns_used: 100, mask_sample: true },
      { reward: 0.25 },
    ];
    const [b, other] = gymAggregateMetrics(rows);
    expect(b.agent_ref).toEqual({ name: 'b' });
    expect(b.agent_metrics['mean/reward']).toBeCloseTo(2 / 3);
    expect(b.agent_metrics).toMatchObject({ 'max/turns_used': 8, 'min/turns_used': 1, 'median/turns_used': 3, 'mean/turns_used': 4, 'median/reward': 1 });
    expect(b.agent_metrics['std/turns_used']).toBeCloseTo(Math.sqrt(((1 - 4) ** 2 + (3 - 4) ** 2 + (8 - 4) ** 2) / 2)); // sample std, as pandas
    expect(b.agent_metrics['mean/input_tokens']).toBe(9); // response.usage counts, as in Gym
    expect(b.agent_metrics['mean/finished_naturally']).toBeCloseTo(2 / 3);
    expect(Object.keys(b.agent_metrics).some((k) => k.includes('_ng_') || k.includes('failure_reason') || k.includes('response'))).toBe(false);
    expect(b.key_metrics).toEqual(Object.fromEntries(Object.entries(b.agent_metrics).filter(([k]) => k.startsWith('mean/'))));
    expect(b.group_level_metrics.map((g) => [g._ng_task_index, g.num_rollouts, g['mean/reward']])).toEqual([[0, 2, 0.5], [1, 1, 1]]);
    expect(other).toMatchObject({ agent_ref: { name: 'vcfleet_opencode_agent' }, key_metrics: { 'mean/reward': 0.25 }, group_level_metrics: [{ _ng_task_index: 0, num_rollouts: 1 }] });
    expect(other.agent_metrics['std/reward']).toBe(0);
    expect(gymAggregateMetrics([{ reward: 1, mask_sample: true }])).toEqual([]);
  });

  it("is, for serve's endpoint, one object over all the rows posted (the collector adds agent_ref)", () => {
    const one = aggregateMetrics([{ agent_ref: { name: 'x' }, _ng_task_index: 0, reward: 1 }, { _ng_task_index: 0, reward: 0 }, { reward: 1, mask_sample: true }]);
    expect(one).not.toHaveProperty('agent_ref');
    expect(one).toMatchObject({ agent_metrics: { 'mean/reward': 0.5 }, key_metrics: { 'mean/reward': 0.5 }, group_level_metrics: [{ _ng_task_index: 0, num_rollouts: 2 }] });
  });
});
