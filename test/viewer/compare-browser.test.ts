/**
 * The viewer's compare page and paper table in a real headless browser (Debian chromium through
 * playwright-core) over an output file with two runs, B made from A with two answers flipped and a
 * task removed: the page is reached from the runs list by choosing both runs, shows both runs, their
 * per-type chart with intervals, and the flipped puzzles linking to the rollouts of both; it is
 * screenshotted (into `VCFLEET_SCREENSHOTS` when set: `VCFLEET_SCREENSHOTS=docs` writes
 * docs/viewer-compare.png). The run page prints the paper's table with ± and the published rows.
 */
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFileSource } from '../../src/viewer/file-source.ts';
import { startViewerServer, type ViewerServer } from '../../src/viewer/server.ts';
import { launchBrowser, navigate, openPage } from '../helpers/browser.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { writeViewerFixture, type FixtureRollout, type ViewerFixture } from '../helpers/viewer-fixture.ts';

const SPATIAL = { type: 'Spatial Perception', subtype: '3D Views' };
const MAZE = { type: 'Visual Tracking', subtype: 'Maze' };

/** A: t1, t2 right (Spatial), t3 wrong, t4, t5 right (Tracking). B: t1 wrong, t3 right, t5 gone. */
const RUN_A: FixtureRollout[] = [
  { task_id: 't1', ...SPATIAL, outcome: 'correct' },
  { task_id: 't2', ...SPATIAL, outcome: 'correct' },
  { task_id: 't3', ...MAZE, outcome: 'wrong' },
  { task_id: 't4', ...MAZE, outcome: 'correct' },
  { task_id: 't5', ...MAZE, outcome: 'correct' },
];
const RUN_B: FixtureRollout[] = [
  { task_id: 't1', ...SPATIAL, outcome: 'wrong' },
  { task_id: 't2', ...SPATIAL, outcome: 'correct' },
  { task_id: 't3', ...MAZE, outcome: 'correct' },
  { task_id: 't4', ...MAZE, outcome: 'correct' },
];

let browser: Browser;
let server: ViewerServer;
let f: ViewerFixture;
let dir: string;

beforeAll(async () => {
  browser = await launchBrowser();
  dir = createTmpDir();
  f = writeViewerFixture(dir, [{ runId: 'ra', rollouts: RUN_A }, { runId: 'rb', rollouts: RUN_B }]);
  server = await startViewerServer(createFileSource(f.jsonl), { host: '127.0.0.1', port: 0, credentials: { user: null, password: null, token: null } });
});
afterAll(async () => {
  await browser?.close();
  await server?.close();
  removeTmpDirs();
});

const rolloutOf = (runId: string, task: string) => f.rows.find((r) => r.run_id === runId && r.task_id === task)!.rollout_id;

describe('the compare page in a browser', () => {
  it('is reached by choosing two runs, shows both and the flips linking both rollouts, and is screenshotted', async () => {
    const { page, errors } = await openPage(browser);
    await navigate(page, () => page.goto(server.url));
    await navigate(page, () => page.locator('#compare-link').click());
    await page.selectOption('#run-a', 'ra');
    await page.selectOption('#run-b', 'rb');
    await navigate(page, () => page.locator('#compare-go').click());
    expect(new URL(page.url()).search).toBe('?a=ra&b=rb');

    expect(await page.locator('p[data-side="A"] a').textContent()).toBe('ra');
    expect(await page.locator('p[data-side="B"] a').textContent()).toBe('rb');
    // Paired t1..t4: A 3/4, B 3/4; one flip each way; McNemar exact p = 2 * (1 + 1) / 4 capped at 1.
    expect(await page.locator('[data-metric="accuracy_a"] .card-value').textContent()).toBe('75.0%');
    expect(await page.locator('[data-metric="accuracy_b"] .card-value').textContent()).toBe('75.0%');
    expect(await page.locator('[data-metric="flips"] .card-value').textContent()).toBe('1 / 1');
    expect(await page.locator('[data-metric="mcnemar_p"] .card-value').textContent()).toBe('1.0000');
    expect(await page.locator('#unpaired').textContent()).toContain('t5 (A)');

    // The per-type chart: both runs per type, each with its whisker.
    const groups = page.locator('svg.compare .compare-row');
    expect(await groups.count()).toBe(2);
    expect(await page.locator('svg.compare g.side[data-group="Spatial Perception"][data-side="a"]').getAttribute('data-accuracy')).toBe('1');
    expect(await page.locator('svg.compare g.side[data-group="Spatial Perception"][data-side="b"]').getAttribute('data-accuracy')).toBe('0.5');
    expect(await page.locator('svg.compare g.side[data-group="Visual Tracking"][data-side="a"]').getAttribute('data-accuracy')).toBe('0.5');
    expect(await page.locator('svg.compare line.whisker[data-lo]').count()).toBe(4);

    // The flipped puzzles, linking to the rollouts of both runs.
    const flips = page.locator('table.flips tbody tr');
    expect(await flips.count()).toBe(2);
    expect(await page.locator('table.flips tr[data-task="t1"] td').nth(3).textContent()).toBe('1');
    expect(await page.locator('table.flips tr[data-task="t1"] td').nth(4).textContent()).toBe('0');
    expect(await page.locator(`table.flips tr[data-task="t3"] a[data-rollout="${rolloutOf('ra', 't3')}"]`).count()).toBe(1);
    const shot = path.join(process.env.VCFLEET_SCREENSHOTS ?? dir, 'viewer-compare.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(existsSync(shot) && statSync(shot).size > 10_000).toBe(true);

    await navigate(page, () => page.locator(`table.flips tr[data-task="t1"] a[data-rollout="${rolloutOf('rb', 't1')}"]`).click());
    expect(page.url()).toContain(`/runs/rb/rollouts/${encodeURIComponent(rolloutOf('rb', 't1'))}`);
    expect(errors).toEqual([]);
  }, 120_000);

  it('says why two runs cannot be compared (an unknown run), and the run page prints the paper table with ±', async () => {
    const { page, errors } = await openPage(browser);
    const res = await page.request.get(`${server.url}api/compare?a=ra&b=nope`);
    expect(res.status()).toBe(400);
    expect((await res.json()).error).toBe('no run "nope" here');
    await navigate(page, () => page.goto(`${server.url}runs/ra`));
    // One pass: 4 of 5 right (80.0 ± 0.0); Spatial 2/2, Tracking 2/3.
    expect(await page.locator('table.paper tr.overall td').nth(1).textContent()).toBe('80.0 ± 0.0');
    expect(await page.locator('table.paper tr.type[data-group="Visual Tracking"] td').nth(1).textContent()).toBe('66.7 ± 0.0');
    expect(await page.locator('table.paper tr.subtype').count()).toBe(2);
    expect(await page.locator('table.paper tr[data-published="Human adults"] td').nth(1).textContent()).toBe('94.1');
    expect(errors).toEqual([]);
  }, 120_000);
});
