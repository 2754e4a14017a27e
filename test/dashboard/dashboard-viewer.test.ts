/**
 * The dashboard as the way into a live run, in a real headless browser (Debian chromium through
 * playwright-core), over a fleet of real stage workers with the scripted agent: the runs table links
 * a run to its viewer page, which shows the run's numbers; a rollout page shows the transcript the
 * results consumer wrote beside the JSONL, or names the path it looked for once the file is gone; a
 * run whose every row is masked shows as failed with its masked rows one click away; and a job in
 * Bull Board links to its rollout page, whichever queue holds it.
 */
import os from 'node:os';
import { existsSync, readFileSync, renameSync } from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDashboard, type Dashboard } from '../../src/dashboard/server.ts';
import { RowSchema, type Row } from '../../src/shared/records/rows.ts';
import { createScriptedAgent } from '../../src/agent/scripted-agent.ts';
import { launchBrowser, openPage, viewerReady } from '../helpers/browser.ts';
import { startInProcessFleet, type InProcessFleet } from '../helpers/in-process-fleet.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { makeFleetEnv, waitFor, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

function readRows(file: string): Row[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((l) => RowSchema.parse(JSON.parse(l)));
}

describe('the dashboard links runs, rollouts and jobs to the viewer', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  let fleet: InProcessFleet;
  let browser: Browser;
  let dashboard: Dashboard;
  let deadOutput: string;
  /** The task the agent answers wrongly in run `live`. */
  let wrongTask: string;

  beforeAll(async () => {
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url, overrides: ['++queues.rollout_attempts=1', '++dashboard.port=0'] });
    // Every role of this host reads and writes outputs under the test's folder.
    const config = env.config([`++output_root=${env.dir}`, '++run_id=live']);
    fleet = startInProcessFleet(env, config);
    wrongTask = env.fixture.expected[1].task_id;
    await fleet.judge();
    await fleet.results();

    // Run `live`: two of three answered right; every rollout keeps its transcript.
    const healthy = await fleet.sandbox(createScriptedAgent({ '*': { answer: '@gold' }, [wrongTask]: { answer: 'no such option' } }));
    await fleet.produce();
    await waitFor('3 rows of run live with their transcripts', () => {
      const rows = readRows(env.output);
      return rows.length === 3 && rows.every((r) => r.transcript !== null);
    });
    await fleet.stop(healthy);

    // Run `dead`: the sandbox provider fails every rollout for good, so every row is masked.
    deadOutput = path.join(env.dir, 'out', 'dead.jsonl');
    await fleet.sandbox(createScriptedAgent({ '*': { answer: '@gold', infra_fail_attempts: 99 } }));
    await fleet.produce(env.config([`++output_root=${env.dir}`, '++run_id=dead', `++output_jsonl_fpath=${deadOutput}`]));
    await waitFor('3 infra_failed rows of run dead', () => readRows(deadOutput).filter((r) => r.failure_kind === 'infra_failed').length === 3);

    dashboard = await startDashboard({ config, logger: env.logger, redis: fleet.worker });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await dashboard?.close();
    await fleet?.close();
    await env?.cleanup();
    removeTmpDirs();
  });

  it('links a run from the runs table to its viewer page, with the run\'s numbers and transcripts', async () => {
    const { page, errors } = await openPage(browser);
    await page.goto(dashboard.url);
    const live = page.locator('tr[data-run="live"]');
    expect(await live.getAttribute('data-state')).toBe('complete');
    expect(await live.locator('.done').textContent()).toBe('3/3 ✓');
    expect(await live.locator('.accuracy').textContent()).toBe('66.7% (2/3)');
    expect(await live.locator('.output').textContent()).toBe(`${env.output} on ${os.hostname()}`);

    const [response] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/viewer/runs/live')), live.locator('a.run-page').click()]);
    expect(response.headers()['content-security-policy']).toContain("default-src 'none'");
    await viewerReady(page);
    expect(await page.locator('[data-metric="mean/reward"] .card-value').textContent()).toBe('66.7%');
    expect(await page.locator('[data-metric="rollouts"] .card-value').textContent()).toBe('3');
    expect(await page.locator('[data-metric="masked"] .card-value').textContent()).toBe('0');
    expect(await page.locator('.table-count').getAttribute('data-count')).toBe('3');
    expect(await page.locator('p.sub').textContent()).toContain(`output ${env.output}`);

    // The viewer's own list of runs (its crumbs lead there) is the runs in Redis too.
    await Promise.all([page.waitForNavigation(), page.locator('nav.crumbs a', { hasText: 'runs' }).click()]);
    await viewerReady(page);
    expect(await page.locator('table.runs tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-run')).sort())).toEqual(['dead', 'live']);
    await Promise.all([page.waitForNavigation(), page.locator('tr[data-run="live"] a').click()]);
    await viewerReady(page);

    // The wrong answer's rollout: its one turn, as the scripted agent wrote it, and the puzzle it was shown.
    const rolloutId = `live-${wrongTask}-0`;
    await Promise.all([page.waitForNavigation(), page.locator(`tr[data-rollout="${rolloutId}"] a.rollout-link`).click()]);
    await viewerReady(page);
    expect(await page.locator('.turns h2').textContent()).toBe('Turns (1)');
    expect(await page.locator('.turn pre.text').first().textContent()).toBe('The answer is \\boxed{no such option}.');
    expect(await page.locator('[data-field="judge_verdict"]').textContent()).toBe('different');
    await page.waitForFunction(() => {
      const img = document.querySelector<HTMLImageElement>('.puzzle img');
      return img !== null && img.complete && img.naturalWidth > 0;
    });
    expect(errors).toEqual([]);
  });

  it('names the path it looked for when a transcript is not on this host', async () => {
    const rolloutId = `live-${env.fixture.expected[2].task_id}-0`;
    const row = readRows(env.output).find((r) => r.rollout_id === rolloutId)!;
    const file = path.resolve(path.dirname(env.output), row.transcript!);
    // Moved away for this test only: the other tests see every transcript.
    renameSync(file, `${file}.away`);
    try {
      const { page } = await openPage(browser);
      await page.goto(`${dashboard.url}viewer/runs/live/rollouts/${rolloutId}`);
      await viewerReady(page);
      expect(await page.locator('.notice.transcript-missing').textContent()).toBe(`The transcript is not on this host: looked for ${file}. This page shows the row only.`);
      expect(await page.locator('[data-field="judge_verdict"]').textContent()).toBe('equivalent');
    } finally {
      renameSync(`${file}.away`, file);
    }
  });

  it('shows a run whose every row is masked as failed, and its masked rows one click away', async () => {
    const { page, errors } = await openPage(browser);
    await page.goto(dashboard.url);
    const dead = page.locator('tr[data-run="dead"]');
    expect(await dead.getAttribute('data-state')).toBe('failed');
    expect(await dead.locator('.done').textContent()).toBe('3/3 complete ✗ every row masked (nothing scored)');
    expect(await dead.locator('.accuracy').textContent()).toBe('– (0/0)');
    expect(await dead.locator('.output').textContent()).toBe(`${deadOutput} on ${os.hostname()}`);
    await Promise.all([page.waitForNavigation(), dead.locator('.masked a', { hasText: 'infra_failed 3' }).click()]);
    await viewerReady(page);
    expect(new URL(page.url()).searchParams.get('masked')).toBe('infra_failed');
    expect(await page.locator('select[name="masked"]').inputValue()).toBe('infra_failed');
    expect(await page.locator('.table-count').getAttribute('data-count')).toBe('3');
    expect(await page.locator('[data-metric="masked"] .card-detail').textContent()).toBe('infra_failed 3');
    expect(errors).toEqual([]);
  });

  it('links a job in Bull Board to its rollout page, in every queue', async () => {
    const { page } = await openPage(browser);
    const rolloutId = `live-${wrongTask}-0`;
    const links = (run: string) => env.fixture.expected.map((t) => `/viewer/runs/${run}/rollouts/${run}-${t.task_id}-0`);
    // Run dead's rollouts failed for good; their masked rows went on to the results queue.
    const expected: Array<[string, string, string[]]> = [
      ['rollout', 'completed', links('live')], ['rollout', 'failed', links('dead')],
      ['judge', 'completed', links('live')], ['results', 'completed', [...links('live'), ...links('dead')]],
    ];
    for (const [queue, status, hrefs] of expected) {
      await page.goto(`${dashboard.url}queues/queue/${queue}?status=${status}`);
      const link = page.getByRole('link', { name: 'rollout page' });
      await link.first().waitFor();
      const shown = await link.evaluateAll((as) => as.map((a) => a.getAttribute('href')));
      expect(shown.sort(), `${queue} ${status}`).toEqual(hrefs.sort());
    }

    // The board opens the link in a new tab: click it there, and land on the rollout's page.
    await page.goto(`${dashboard.url}queues/queue/judge?status=completed`);
    const link = page.getByRole('link', { name: 'rollout page' }).and(page.locator(`[href="/viewer/runs/live/rollouts/${rolloutId}"]`));
    const [tab] = await Promise.all([page.context().waitForEvent('page'), link.click()]);
    await tab.waitForLoadState();
    expect(new URL(tab.url()).pathname).toBe(`/viewer/runs/live/rollouts/${rolloutId}`);
    await viewerReady(tab);
    expect(await tab.locator('h1').textContent()).toContain(`Task ${wrongTask}, repeat 0`);
    expect(await tab.locator('[data-field="extracted_answer"]').textContent()).toBe('no such option');
  });
});
