/**
 * The viewer in a real headless browser (Debian chromium through playwright-core) over a generated
 * output folder with two runs: the run page's charts show the fixture's numbers, the table filters
 * to the wrong answers, a rollout page shows the bash call and the crop image the model `read`,
 * model text with <script> and <img onerror> shows literally and runs nothing, previous/next follow
 * the filter (also after a reload), and a 3,104-row run renders page by page.
 */
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFileSource } from '../../src/viewer/file-source.ts';
import { wilsonCi95 } from '../../src/viewer/group-ci.ts';
import { startViewerServer, type ViewerServer } from '../../src/viewer/server.ts';
import { launchBrowser, navigate, openPage as openWatchedPage } from '../helpers/browser.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { babyVisionSizedRollouts } from '../helpers/viewer-fixture-bulk.ts';
import { HOSTILE_ANSWER, HOSTILE_TEXT, writeViewerFixture, type FixtureRollout, type ViewerFixture } from '../helpers/viewer-fixture.ts';

const SPATIAL = { type: 'Spatial Perception', subtype: '3D Views' };
const FOLDING = { type: 'Spatial Perception', subtype: 'Paper Folding' };
const MAZE = { type: 'Visual Tracking', subtype: 'Maze' };

/** Spatial: 2 of 3 scored correct (one masked). Tracking: 1 of 5. Wrong answers: 101-1, 103-0, 103-1, 104-0, 104-1. */
const R1: FixtureRollout[] = [
  { task_id: '101', repeat: 0, ...SPATIAL, outcome: 'correct' },
  { task_id: '101', repeat: 1, ...SPATIAL, outcome: 'wrong', script: 'crop' },
  { task_id: '102', repeat: 0, ...FOLDING, outcome: 'correct', extra_turns: 3 },
  { task_id: '102', repeat: 1, ...FOLDING, outcome: 'judge_failed' },
  { task_id: '103', repeat: 0, ...MAZE, outcome: 'wrong', script: 'hostile' },
  { task_id: '103', repeat: 1, ...MAZE, outcome: 'wrong', transcript: 'missing' },
  { task_id: '104', repeat: 0, ...MAZE, outcome: 'no_answer', script: 'long_output' },
  { task_id: '104', repeat: 1, ...MAZE, outcome: 'timeout' },
  { task_id: '105', repeat: 0, ...MAZE, outcome: 'infra_failed', transcript: 'none' },
  { task_id: '105', repeat: 1, ...MAZE, outcome: 'correct' },
];

let browser: Browser;
const servers: ViewerServer[] = [];

async function serve(f: ViewerFixture): Promise<string> {
  const server = await startViewerServer(createFileSource(f.jsonl), { host: '127.0.0.1', port: 0, credentials: { user: null, password: null, token: null } });
  servers.push(server);
  return server.url;
}

const openPage = () => openWatchedPage(browser);
const go = navigate;

const attr = (page: Page, selector: string, name: string) => page.locator(selector).getAttribute(name);

beforeAll(async () => {
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  for (const s of servers) await s.close();
  removeTmpDirs();
});

describe('the rollout viewer in a browser', () => {
  let f: ViewerFixture;
  let url: string;
  beforeAll(async () => {
    f = writeViewerFixture(createTmpDir(), [
      { runId: 'r1', rollouts: R1 },
      { runId: 'r2', rollouts: [{ task_id: '900', ...MAZE, outcome: 'correct' }] },
    ]);
    url = await serve(f);
  });

  it('lists the runs of the file and draws a run with its own numbers', async () => {
    const { page, errors } = await openPage();
    await go(page, () => page.goto(url));
    expect(await page.locator('table.runs tbody tr').count()).toBe(2);
    await go(page, () => page.locator('tr[data-run="r1"] a').click());

    // Headline: 3 correct of 8 scored; 2 masked (judge_failed, infra_failed).
    expect(await page.locator('[data-metric="mean/reward"] .card-value').textContent()).toBe('37.5%');
    expect(await page.locator('[data-metric="strict/reward"] .card-value').textContent()).toBe('30.0%');
    expect(await page.locator('[data-metric="masked"] .card-value').textContent()).toBe('2');
    expect(await page.locator('[data-metric="masked"] .card-detail').textContent()).toBe('infra_failed 1, judge_failed 1');

    // Accuracy by type: the Spatial bar is drawn at 2/3 of the track, its whisker at the Wilson bounds.
    const spatial = '#by-type .bar-row[data-group="Spatial Perception"]';
    expect(Number(await attr(page, `${spatial} rect.bar`, 'width')) / Number(await attr(page, `${spatial} rect.track`, 'width'))).toBeCloseTo(2 / 3, 6);
    expect(await page.locator(`${spatial} text.value`).textContent()).toBe('66.7% (2/3)');
    const [lo, hi] = wilsonCi95(2, 3)!;
    expect(Number(await attr(page, `${spatial} line.whisker[data-lo]`, 'data-lo'))).toBeCloseTo(lo, 9);
    expect(Number(await attr(page, `${spatial} line.whisker[data-lo]`, 'data-hi'))).toBeCloseTo(hi, 9);
    expect(await page.locator('#by-type .bar-row[data-group="Visual Tracking"] text.value').textContent()).toBe('20.0% (1/5)');
    expect(await page.locator('#by-subtype .bar-row').count()).toBe(3);

    // The outcome breakdown and the histograms count every rollout of the run once.
    const outcomes = Object.fromEntries(await page.locator('#outcomes .bar-row').evaluateAll((gs) => gs.map((g) => [g.getAttribute('data-outcome'), Number(g.getAttribute('data-count'))])));
    expect(outcomes).toEqual({ answered: 6, no_answer: 1, timeout: 1, output_cap: 0, context_limit: 0, agent_error: 0, judge_failed: 1, infra_failed: 1 });
    expect(await page.locator('#outcomes .bar-row[data-outcome="answered"] text.value').textContent()).toBe('6 (60.0%)');
    for (const id of ['#hist-turns', '#hist-tool-calls', '#hist-wall']) {
      const counts = await page.locator(`${id} rect.bar`).evaluateAll((rs) => rs.map((r) => Number(r.getAttribute('data-count'))));
      expect(counts.reduce((a, b) => a + b, 0)).toBe(10);
    }
    expect(errors).toEqual([]);
  });

  it('filters the table to the wrong answers and opens the rollout that read its crop', async () => {
    const { page, errors } = await openPage();
    await go(page, () => page.goto(`${url}runs/r1`));
    expect(await attr(page, '.table-count', 'data-count')).toBe('10');
    await page.selectOption('select[name="reward"]', '0');
    await page.waitForSelector('.table-count[data-count="5"]');
    expect(await page.locator('table.rollouts tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-rollout')))).toEqual(['r1-101-1', 'r1-103-0', 'r1-103-1', 'r1-104-0', 'r1-104-1']);
    expect(new URL(page.url()).searchParams.get('reward')).toBe('0');

    await go(page, () => page.locator('tr[data-rollout="r1-101-1"] a.rollout-link').click());
    expect(await page.locator('.tool-call[data-tool="bash"] pre.args').textContent()).toContain(".crop((0,0,60,60)).save('crop.png')");
    expect(await page.locator('.tool-call[data-tool="bash"] pre.tool-output').textContent()).toBe('saved crop.png (60x60)\n');
    const loaded = (selector: string) => page.waitForFunction((sel) => {
      const img = document.querySelector<HTMLImageElement>(sel);
      return img !== null && img.complete && img.naturalWidth > 0;
    }, selector);
    await loaded(`.tool-call[data-tool="read"] img[data-sha="${f.cropSha}"]`);
    await loaded(`.puzzle img[data-sha="${f.puzzles['101']}"]`);
    expect(await page.locator('[data-field="refused_requests"]').textContent()).toBe('path 1');
    // Both grades side by side: the judge's reward and the reference's string match.
    expect(await page.locator('[data-grade="judge"]').textContent()).toBe('judge: 0');
    expect(await page.locator('[data-grade="string_match"]').textContent()).toBe('string match: 0');
    expect(await page.locator('[data-field="failure_reason"]').textContent()).toBe('incorrect_answer');

    // Previous/next follow the filter: unfiltered, the next rollout would be r1-102-0.
    expect(await page.locator('.position').textContent()).toBe('1 of 5 in the current filter');
    expect(await page.locator('span.prev.disabled').count()).toBe(1);
    await go(page, () => page.locator('a.next').click());
    expect(new URL(page.url()).pathname).toBe('/runs/r1/rollouts/r1-103-0');
    expect(errors).toEqual([]);
  });

  it('shows model text that is HTML as text, and runs none of it', async () => {
    const { page, errors } = await openPage();
    await go(page, () => page.goto(`${url}runs/r1/rollouts/r1-103-0?reward=0`));
    await page.waitForTimeout(300); // time for an onerror or a script to have run, had it been parsed
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    expect(await page.locator('script').count()).toBe(1);
    expect(await page.locator('.turn pre.text').first().textContent()).toContain(HOSTILE_TEXT);
    expect(await page.locator('.tool-call[data-tool="bash"] pre.tool-output').textContent()).toBe(`${HOSTILE_TEXT}\n`);
    expect(await page.locator('[data-field="extracted_answer"]').textContent()).toBe(HOSTILE_ANSWER);
    expect(await page.locator('.judge-reason pre').textContent()).toBe(`judge saw ${HOSTILE_TEXT}`);
    expect(await page.locator('body').innerText()).toContain('<script>window.__pwned = 1</script>');
    expect(errors).toEqual([]);
  });

  it('keeps the filter through a reload, a missing transcript and the way back to the table', async () => {
    const { page, errors } = await openPage();
    await go(page, () => page.goto(`${url}runs/r1/rollouts/r1-103-1?reward=0`));
    expect(await page.locator('.notice.transcript-missing').textContent()).toContain(`looked for ${path.join(f.transcriptsDir, 'r1-103-1.json')}`);
    expect(await page.locator('[data-field="judge_verdict"]').textContent()).toBe('different');
    await go(page, () => page.reload());
    expect(await page.locator('.position').textContent()).toBe('3 of 5 in the current filter');
    await go(page, () => page.locator('a.next').click());

    // A long tool output starts collapsed; the other repeat of the task is linked.
    expect(await page.locator('.tool-call[data-tool="bash"] details.tool-output').getAttribute('open')).toBeNull();
    expect(await page.locator('a.attempt[data-repeat="1"]').getAttribute('href')).toBe('/runs/r1/rollouts/r1-104-1?reward=0');
    await go(page, () => page.locator('a.next').click());
    expect(await page.locator('span.next.disabled').count()).toBe(1); // 5 of 5; unfiltered, r1-105-0 would follow

    await go(page, () => page.locator('a.back').click());
    expect(await page.locator('select[name="reward"]').inputValue()).toBe('0');
    expect(await attr(page, '.table-count', 'data-count')).toBe('5');
    expect(errors).toEqual([]);
  });

  it('renders a 3,104-row run 100 rows at a time, and filters and pages it', async () => {
    const f = writeViewerFixture(createTmpDir(), [{ runId: 'big', rollouts: babyVisionSizedRollouts() }], { imageSize: [30, 20] });
    const url = await serve(f);
    const { page, errors } = await openPage();
    await go(page, () => page.goto(`${url}runs/big`));
    expect(await attr(page, '.table-count', 'data-count')).toBe('3104');
    expect(await page.locator('table.rollouts tbody tr').count()).toBe(100);
    await page.selectOption('select[name="reward"]', '1');
    const correct = f.rows.filter((r) => r.reward === 1 && r.failure_kind === null).length;
    await page.waitForSelector(`.table-count[data-count="${correct}"]`);
    await page.locator('.pager button[data-page="2"]').click();
    await page.waitForFunction(() => new URL(location.href).searchParams.get('page') === '2');
    expect(await page.locator('table.rollouts tbody tr[data-reward="1"]').count()).toBe(100);
    expect(errors).toEqual([]);
  });
});
