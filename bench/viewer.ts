/**
 * The rollout viewer on a BabyVision-sized run (388 tasks x 8 repeats = 3,104 rollouts, every one
 * with its transcript): how long the run page and a rollout page take to become interactive in
 * headless Chromium, and how long the table takes to redraw after a filter, a sort or a search.
 * Optionally writes the screenshots in docs/.
 *
 *   node bin/run-ts.js bench/viewer.ts                       # print the figures
 *   node bin/run-ts.js bench/viewer.ts --screenshots docs    # and write docs/viewer-run.png, docs/viewer-rollout.png
 *
 * Flags: --rounds N page loads of each page, medians reported [7]; --tasks N [388]; --repeats N [8];
 * --screenshots DIR.
 *
 * "Interactive" is the client's `vcfleet-ready` performance mark, in ms since navigation start: the
 * page's data is fetched, its charts and the first 100 table rows are drawn, and its controls work.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { chromium, type Page } from 'playwright-core';
import { createFileSource } from '../src/viewer/file-source.ts';
import { startViewerServer } from '../src/viewer/server.ts';
import { babyVisionSizedRollouts } from '../test/helpers/viewer-fixture-bulk.ts';
import { writeViewerFixture } from '../test/helpers/viewer-fixture.ts';
import { median } from './lib/stats.ts';

const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'];

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '7' }, tasks: { type: 'string', default: '388' }, repeats: { type: 'string', default: '8' }, screenshots: { type: 'string' } } });

/** Load `url` and return its ready mark and its data fetches, in ms since navigation start. */
async function load(page: Page, url: string): Promise<{ ready: number; data: number }> {
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]');
  return page.evaluate(() => {
    const ready = performance.getEntriesByName('vcfleet-ready')[0].startTime;
    const api = performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/'));
    return { ready, data: Math.max(...api.map((e) => (e as PerformanceResourceTiming).responseEnd)) };
  });
}

/** Time, in the page, from a control change to the redrawn table (the redraw is synchronous). */
function redraw(page: Page, action: 'filter' | 'sort' | 'search'): Promise<number> {
  return page.evaluate((what) => {
    const t0 = performance.now();
    if (what === 'filter') {
      const select = document.querySelector<HTMLSelectElement>('select[name="reward"]')!;
      select.value = select.value === '0' ? '' : '0';
      select.dispatchEvent(new Event('change', { bubbles: true }));
    } else if (what === 'sort') {
      document.querySelector<HTMLButtonElement>('button.sort[data-sort="wall_s"]')!.click();
    } else {
      const input = document.querySelector<HTMLInputElement>('input[name="q"]')!;
      input.value = input.value ? '' : '10';
      input.dispatchEvent(new Event('change', { bubbles: true }));
    }
    return performance.now() - t0;
  }, action);
}

const ms = (x: number) => `${Math.round(x)} ms`;

async function main(): Promise<void> {
  const rounds = Number(args.rounds);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'vcfleet-viewer-bench-'));
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  const t0 = performance.now();
  const rollouts = babyVisionSizedRollouts({ tasks: Number(args.tasks), repeats: Number(args.repeats) });
  const f = writeViewerFixture(path.join(dir, 'results'), [{ runId: 'babyvision-demo', rollouts }], { stem: 'babyvision_opencode' });
  const generated = performance.now() - t0;
  const server = await startViewerServer(createFileSource(f.jsonl), { host: '127.0.0.1', port: 0, credentials: { user: null, password: null, token: null } });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const runUrl = `${server.url}runs/babyvision-demo`;
    const crop = f.rows.find((r) => r.refused_requests.path === 1 && r.reward === 0 && r.turns >= 3) ?? f.rows[0];
    const rolloutUrl = `${server.url}runs/babyvision-demo/rollouts/${encodeURIComponent(crop.rollout_id)}?reward=0`;
    await load(page, runUrl); // warm-up: the client bundle and the file's first parse
    const runLoads = [];
    for (let i = 0; i < rounds; i++) runLoads.push(await load(page, runUrl));
    const redraws = { filter: [] as number[], sort: [] as number[], search: [] as number[] };
    for (let i = 0; i < rounds; i++) for (const k of ['filter', 'sort', 'search'] as const) redraws[k].push(await redraw(page, k));
    const rolloutLoads = [];
    for (let i = 0; i < rounds; i++) rolloutLoads.push(await load(page, rolloutUrl));

    const out = [
      `viewer, ${f.rows.length} rollouts (${args.tasks} tasks x ${args.repeats} repeats), fixture written in ${ms(generated)}; medians of ${rounds} loads in headless Chromium`,
      `  run page interactive:      ${ms(median(runLoads.map((l) => l.ready)))} after navigation start (data fetched by ${ms(median(runLoads.map((l) => l.data)))}; rounds ${runLoads.map((l) => Math.round(l.ready)).join(', ')})`,
      `  rollout page interactive:  ${ms(median(rolloutLoads.map((l) => l.ready)))} (data fetched by ${ms(median(rolloutLoads.map((l) => l.data)))})`,
      `  table redraw after filter / sort / search: ${ms(median(redraws.filter))} / ${ms(median(redraws.sort))} / ${ms(median(redraws.search))}`,
    ];
    process.stdout.write(`${out.join('\n')}\n`);
    if (args.screenshots) await screenshots(page, args.screenshots, runUrl, rolloutUrl);
  } finally {
    await browser.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function screenshots(page: Page, dir: string, runUrl: string, rolloutUrl: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  await page.setViewportSize({ width: 1280, height: 1500 });
  await load(page, runUrl);
  await page.screenshot({ path: path.join(dir, 'viewer-run.png') });
  await load(page, rolloutUrl);
  await page.waitForFunction(() => Array.from(document.images).every((img) => img.complete && img.naturalWidth > 0));
  await page.screenshot({ path: path.join(dir, 'viewer-rollout.png') });
  process.stdout.write(`wrote ${path.join(dir, 'viewer-run.png')} and ${path.join(dir, 'viewer-rollout.png')}\n`);
}

await main();
