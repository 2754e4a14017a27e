/**
 * The rollout page's token capture in a real browser: a row with a trainable trajectory shows its
 * calls, chain, mask and each turn's generated vs inserted token counts from the trajectory file; a
 * row whose chain broke shows where and why; a row whose file is not on this host says so.
 */
import { writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRAJECTORY_VERSION, trajectoryRelPath, type Trajectory } from '../../src/shared/records/trajectory.ts';
import { createFileSource } from '../../src/viewer/file-source.ts';
import { startViewerServer, type ViewerServer } from '../../src/viewer/server.ts';
import { launchBrowser, navigate, openPage } from '../helpers/browser.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { writeViewerFixture } from '../helpers/viewer-fixture.ts';

const MAZE = { type: 'Visual Tracking', subtype: 'Maze' };

function trajectory(runId: string, rolloutId: string, broken: boolean): Trajectory {
  const call = (index: number) => ({
    index, started_at: '2026-01-01T00:00:00Z', latency_ms: 10, status: 200, finish_reason: 'stop', answered: true, prompt_token_count: 10,
    generation_token_ids: [1, 2, 3], generation_log_probs: [-0.1, -0.2, -0.3], missing: [], sampling: { temperature: 1 }, weight_version: 'w9', images: [],
  });
  return {
    trajectory_version: TRAJECTORY_VERSION, run_id: runId, rollout_id: rolloutId, task_id: rolloutId, repeat: 0, attempt: 1, policy_model: 'p', weight_version: 'w9',
    stop_reason: 'answered', reward: 1, mask_sample: broken, mask_reason: broken ? 'chain_broken' : null, mask_detail: broken ? 'call 1: its prompt differs at token 12' : null,
    chain: { contiguous: !broken, breaks: broken ? [{ call: 1, token: 12, why: 'its prompt differs at token 12' }] : [] },
    calls: [{ ...call(0), prompt_token_ids: Array(120).fill(7) }, { ...call(1), inserted_token_ids: Array(45).fill(8) }],
    other_calls: [{ index: 2, origin: 'unknown', status: 200, latency_ms: 3 }], other_calls_dropped: 0,
    turns: [{ call: 0, generated: 3, inserted: 120 }, { call: 1, generated: 3, inserted: 45 }],
    images: [], image_mimes: {}, flat_calls: broken ? 1 : 2, prompt_ids: Array(120).fill(7),
    response_ids: broken ? [1, 2, 3] : [1, 2, 3, ...Array(45).fill(8), 1, 2, 3], response_mask: broken ? [1, 1, 1] : [1, 1, 1, ...Array(45).fill(0), 1, 1, 1],
    response_logprobs: broken ? [-0.1, -0.2, -0.3] : [-0.1, -0.2, -0.3, ...Array(45).fill(0), -0.1, -0.2, -0.3], truncated: [],
  };
}

describe('token capture on the rollout page', () => {
  let browser: Browser;
  let server: ViewerServer;
  beforeAll(async () => {
    browser = await launchBrowser();
    const dir = createTmpDir('vcfleet-viewer-tc-');
    const f = writeViewerFixture(dir, [{ runId: 'tc', rollouts: [0, 1, 2].map((repeat) => ({ task_id: '201', repeat, ...MAZE, outcome: 'correct' as const })) }]);
    mkdirSync(path.join(dir, 'run_trajectories'));
    const rows = f.rows.map((row) => {
      const broken = row.repeat === 1;
      const rel = trajectoryRelPath(f.jsonl, row.rollout_id);
      if (row.repeat !== 2) writeFileSync(path.join(dir, rel), JSON.stringify(trajectory(row.run_id, row.rollout_id, broken)));
      // Repeat 1 is an old record, masked chain_broken before a broken chain stopped masking; repeat 2's server gave no log-probabilities.
      if (row.repeat === 2) return { ...row, trajectory: rel, token_capture: { calls: 2, contiguous: true, mask_sample: true, mask_reason: 'missing_logprobs' as const } };
      return { ...row, trajectory: rel, token_capture: { calls: 2, contiguous: !broken, mask_sample: broken, mask_reason: broken ? 'chain_broken' : null } };
    });
    writeFileSync(f.jsonl, rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
    server = await startViewerServer(createFileSource(f.jsonl), { host: '127.0.0.1', port: 0, credentials: { user: null, password: null, token: null } });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    removeTmpDirs();
  });

  it('shows calls, chain, mask and per-turn token counts; a broken chain says where; a missing file says so', async () => {
    const { page, errors } = await openPage(browser);
    const text = (sel: string) => page.locator(sel).textContent();
    await navigate(page, () => page.goto(`${server.url}runs/tc/rollouts/tc-201-0`));
    expect(await text('[data-field="tc_calls"]')).toBe('2 of the conversation · 1 apart');
    expect(await text('[data-field="tc_chain"]')).toBe('contiguous');
    expect(await text('[data-field="tc_mask"]')).toBe('no (trainable)');
    expect(await text('[data-field="tc_weight_version"]')).toBe('w9');
    expect(await page.locator('table.token-turns tbody tr').evaluateAll((trs) => trs.map((tr) => Array.from(tr.querySelectorAll('td'), (td) => td.textContent)))).toEqual([['0', '120', '3'], ['1', '45', '3']]);
    await navigate(page, () => page.goto(`${server.url}runs/tc/rollouts/tc-201-1`));
    expect(await text('[data-field="tc_chain"]')).toBe('broken at call 1: its prompt differs at token 12');
    expect(await text('[data-field="tc_mask"]')).toBe('no (trainable)');
    await navigate(page, () => page.goto(`${server.url}runs/tc/rollouts/tc-201-2`));
    expect(await text('[data-field="tc_calls"]')).toBe('2');
    expect(await text('[data-field="tc_mask"]')).toBe('yes: missing_logprobs');
    expect(await text('section.token-capture p.notice')).toMatch(/not on this host/);
    expect(errors).toEqual([]);
  });
});
