/**
 * The one mask rule (shared/output/training-mask.ts) behind the gym row, the token record and the
 * export's count: a masked row, then a missing reward, then the trajectory's own mask, then the row's
 * token-capture summary when the trajectory is not at hand.
 */
import { describe, expect, it } from 'vitest';
import { maskOf } from '../../../src/shared/output/training-mask.ts';

const capture = (mask_sample: boolean, mask_reason: 'chain_broken' | 'output_cap' | 'missing_logprobs' | null) => ({ calls: 2, contiguous: true, mask_sample, mask_reason });
const ok = { failure_kind: null, reward: 1 as const, token_capture: null };

describe('maskOf', () => {
  it('masks a masked row by its kind, keeping the token capture\'s own reason beside it', () => {
    expect(maskOf({ ...ok, failure_kind: 'judge_failed', reward: null }, { mask_sample: true, mask_reason: 'missing_logprobs' })).toEqual({ mask_sample: true, reason: 'judge_failed', capture_reason: 'missing_logprobs' });
    expect(maskOf({ ...ok, failure_kind: 'infra_failed', reward: null })).toEqual({ mask_sample: true, reason: 'infra_failed', capture_reason: null });
  });

  it('masks a row without a reward', () => {
    expect(maskOf({ ...ok, reward: null }, { mask_sample: false, mask_reason: null })).toEqual({ mask_sample: true, reason: 'no_reward', capture_reason: null });
  });

  it('takes the trajectory\'s mask before the row\'s summary, and the summary without a trajectory', () => {
    const row = { ...ok, token_capture: capture(true, 'missing_logprobs') };
    expect(maskOf(row, { mask_sample: false, mask_reason: null })).toEqual({ mask_sample: false, reason: null, capture_reason: null });
    expect(maskOf(row, { mask_sample: true, mask_reason: 'server_ignored_token_fields' })).toEqual({ mask_sample: true, reason: 'server_ignored_token_fields', capture_reason: 'server_ignored_token_fields' });
    expect(maskOf(row, null)).toEqual({ mask_sample: true, reason: 'missing_logprobs', capture_reason: 'missing_logprobs' });
    expect(maskOf(row)).toEqual({ mask_sample: true, reason: 'missing_logprobs', capture_reason: 'missing_logprobs' });
    expect(maskOf(ok)).toEqual({ mask_sample: false, reason: null, capture_reason: null });
    // A token mask without a reason says the rollout did not finish.
    expect(maskOf(ok, { mask_sample: true, mask_reason: null })).toEqual({ mask_sample: true, reason: 'not_finished', capture_reason: null });
  });

  it('an old record masked for a reason the model can cause (a broken chain, the output cap, a rollout it ended) is trainable with its reward', () => {
    for (const reason of ['chain_broken', 'output_cap', 'not_finished'] as const) {
      expect(maskOf({ ...ok, reward: 0 }, { mask_sample: true, mask_reason: reason })).toEqual({ mask_sample: false, reason: null, capture_reason: null });
    }
    expect(maskOf({ ...ok, reward: 0, token_capture: capture(true, 'output_cap') })).toEqual({ mask_sample: false, reason: null, capture_reason: null });
  });
});
