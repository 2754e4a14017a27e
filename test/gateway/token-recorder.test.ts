/**
 * A rollout longer than the capture's bound of ids (gateway/token-recorder.ts) is kept up to the
 * bound and flagged `truncated`, never masked: the calls before the bound keep their ids, the flat
 * form and the steps stop there, and the reward still applies. What does mask is the server's or the
 * infrastructure's doing: a call without token ids, no answered call.
 */
import { policySettings } from '../helpers/policy.ts';
import { describe, expect, it } from 'vitest';
import { buildTrajectory } from '../../src/agent/trajectory-builder.ts';
import { TokenRecorder } from '../../src/gateway/token-recorder.ts';
import { stepRecords } from '../../src/shared/output/step-records.ts';
import type { Row } from '../../src/shared/records/rows.ts';

const call = (index: number, prompt: number[], gen: number[]) => ({
  index, startedAt: '2026-12-03T08:00:00Z', latencyMs: 1, status: 200, answered: true, finishReason: 'stop', promptTokens: prompt.length,
  messages: Array.from({ length: index + 1 }, () => ({ role: 'user' as const, content: 'x' })), sampling: {},
  tokens: { promptIds: prompt, generationIds: gen, logprobs: gen.map(() => -0.5), missing: [] },
});

describe('the capture\'s bounds and masks', () => {
  it('keeps the calls up to the bound, flags the rest as truncated, and masks nothing', () => {
    const rec = new TokenRecorder(policySettings({ weight_version: 'w' }), 12);
    rec.agentCall(call(0, [1, 2, 3, 4], [5, 6]));
    rec.agentCall(call(1, [1, 2, 3, 4, 5, 6, 7], [8, 9]));
    rec.agentCall(call(2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [14, 15]));
    const capture = rec.record();
    expect(capture.over_bounds).toBe(true);
    const t = buildTrajectory({
      request: { runId: 'r', rolloutId: 'ro', repeat: 0, attempt: 1, task: { task_id: 't', image_sha256: 'none' } as never },
      policyModel: 'p', weightVersion: 'w', stopReason: 'answered', capture, images: new Map(),
    });
    expect(t).toMatchObject({ mask_sample: false, mask_reason: null, flat_calls: 2, prompt_ids: [1, 2, 3, 4], response_ids: [5, 6, 7, 8, 9] });
    expect(t.chain.contiguous).toBe(true);
    expect(t.truncated[0]).toMatch(/per-rollout bound/);
    const row = { run_id: 'r', rollout_id: 'ro', task_id: 't', repeat: 0, reward: 0, failure_kind: null, token_capture: null } as unknown as Row;
    expect(stepRecords(row, t, () => 'img')).toMatchObject({ ok: true, truncated: true, records: [{ step: 0, reward: 0, mask_sample: false }, { step: 1, prompt_token_ids: [1, 2, 3, 4, 5, 6, 7] }] });
  });

  it('masks only what the server or the infrastructure caused: a call without token ids, no answered call', () => {
    const build = (rec: TokenRecorder) => buildTrajectory({
      request: { runId: 'r', rolloutId: 'ro', repeat: 0, attempt: 1, task: { task_id: 't', image_sha256: 'none' } as never },
      policyModel: 'p', weightVersion: 'w', stopReason: 'no_answer', capture: rec.record(), images: new Map(),
    });
    const noIds = new TokenRecorder(policySettings({ weight_version: 'w' }));
    noIds.agentCall(call(0, [1, 2], [3]));
    noIds.agentCall({ ...call(1, [1, 2, 3, 4], [5]), tokens: { promptIds: [1, 2, 3, 4], generationIds: null, logprobs: null, missing: ['token_ids', 'logprobs'] } });
    expect(build(noIds)).toMatchObject({ mask_sample: true, mask_reason: 'missing_token_ids', mask_detail: 'call 1 came back without token_ids' });
    const none = new TokenRecorder(policySettings({ weight_version: 'w' }));
    none.agentCall({ ...call(0, [1], [2]), status: 503, answered: false, tokens: null });
    expect(build(none)).toMatchObject({ mask_sample: true, mask_reason: 'no_calls' });
    const fine = new TokenRecorder(policySettings({ weight_version: 'w' }));
    fine.agentCall(call(0, [1, 2], [3]));
    expect(build(fine)).toMatchObject({ mask_sample: false, mask_reason: null, stop_reason: 'no_answer' });
  });
});
