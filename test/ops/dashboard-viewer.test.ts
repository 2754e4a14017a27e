/**
 * The dashboard as the way into a live run, in a real headless browser (Debian chromium through
 * playwright-core), over a fleet of real stage workers with the scripted agent: the runs table links
 * a run to its viewer page, which shows the run's numbers; a rollout page shows the transcript the
 * results consumer wrote beside the JSONL, or names the path it looked for once the file is gone; a
 * run whose every row is masked shows as failed with its masked rows one click away; and a job in
 * Bull Board links to its rollout page, whichever queue holds it.
 */
import os from 'node:os';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDashboard, type Dashboard } from '../../src/dashboard/server.ts';
import { produceRun } from '../../src/producer/produce.ts';
import { loadOrPrepare } from '../../src/prepare/load-or-prepare.ts';
import type { Config } from '../../src/shared/config.ts';
import { createRedis, type Redis } from '../../src/shared/redis.ts';
import { RowSchema, type Row } from '../../src/shared/rows.ts';
import type { StageWorker } from '../../src/shared/stage-worker.ts';
import type { AgentRunner } from '../../src/shared/agent.ts';
import { createFleetJudge } from '../../src/workers/judge/judge-factory.ts';
import { startJudgeWorker } from '../../src/workers/judge/worker.ts';
import { startResultsWorker, type ResultsWorker } from '../../src/workers/results/worker.ts';
import { createScriptedAgent } from '../../src/workers/sandbox/scripted-agent.ts';
import { startSandboxWorker } from '../../src/workers/sandbox/worker.ts';
import { startScriptedJudgeServer, type ScriptedJudgeServer } from '../helpers/scripted-judge-server.ts';
import { makeFleetEnv, REDIS_URL, waitFor, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'];

function readRows(file: string): Row[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((l) => RowSchema.parse(JSON.parse(l)));
}

/** A page that records every console error and uncaught exception. */
async function openPage(browser: Browser): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors: string[] = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(e.message));
  return { page, errors };
}

/** Wait until the viewer's client has drawn the page. */
const viewerReady = (page: Page) => page.waitForSelector('body[data-ready="true"]');

describe('the dashboard links runs, rollouts and jobs to the viewer', () => {
  let judge: ScriptedJudgeServer;
  let env: FleetEnv;
  let worker: Redis;
  let client: Redis;
  let browser: Browser;
  let dashboard: Dashboard;
  let config: Config;
  let deadOutput: string;
  /** The task the agent answers wrongly in run `live`. */
  let wrongTask: string;
  const stages: Array<StageWorker | ResultsWorker> = [];

  async function runFleet(agent: AgentRunner): Promise<StageWorker> {
    const sandbox = await startSandboxWorker({ config, connection: worker, logger: env.logger, agent });
    stages.push(sandbox);
    return sandbox;
  }

  beforeAll(async () => {
    judge = await startScriptedJudgeServer();
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url, overrides: ['++queues.rollout_attempts=1', '++dashboard.port=0'] });
    worker = createRedis(REDIS_URL, 'worker');
    client = createRedis(REDIS_URL, 'client');
    // Every role of this host reads and writes outputs under the test's folder.
    config = env.config([`++output_root=${env.dir}`, '++run_id=live']);
    const bench = await loadOrPrepare(config, env.logger);
    wrongTask = env.fixture.expected[1].task_id;
    stages.push(await startJudgeWorker({ config, connection: worker, logger: env.logger, judge: createFleetJudge(config, env.logger, worker) }));
    const results = startResultsWorker({ config, connection: worker, logger: env.logger });
    stages.push(results);
    await results.ready;

    // Run `live`: two of three answered right; every rollout keeps its transcript.
    const healthy = await runFleet(createScriptedAgent({ '*': { answer: '@gold' }, [wrongTask]: { answer: 'no such option' } }));
    await produceRun({ config, redis: client, logger: env.logger, tasks: bench.tasks, readImage: bench.readImage });
    await waitFor('3 rows of run live with their transcripts', () => {
      const rows = readRows(env.output);
      return rows.length === 3 && rows.every((r) => r.transcript !== null);
    });
    await healthy.close(1000);

    // Run `dead`: the sandbox provider fails every rollout for good, so every row is masked.
    deadOutput = path.join(env.dir, 'out', 'dead.jsonl');
    await runFleet(createScriptedAgent({ '*': { answer: '@gold', infra_fail_attempts: 99 } }));
    const dead = env.config([`++output_root=${env.dir}`, '++run_id=dead', `++output_jsonl_fpath=${deadOutput}`]);
    await produceRun({ config: dead, redis: client, logger: env.logger, tasks: bench.tasks, readImage: bench.readImage });
    await waitFor('3 infra_failed rows of run dead', () => readRows(deadOutput).filter((r) => r.failure_kind === 'infra_failed').length === 3);

    dashboard = await startDashboard({ config, logger: env.logger, redis: worker });
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  });
  afterAll(async () => {
    await browser?.close();
    await dashboard?.close();
    for (const s of stages) await s.close(1000);
    worker?.disconnect();
    client?.disconnect();
    await judge?.close();
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
    rmSync(file);
    const { page } = await openPage(browser);
    await page.goto(`${dashboard.url}viewer/runs/live/rollouts/${rolloutId}`);
    await viewerReady(page);
    expect(await page.locator('.notice.transcript-missing').textContent()).toBe(`The transcript is not on this host: looked for ${file}. This page shows the row only.`);
    expect(await page.locator('[data-field="judge_verdict"]').textContent()).toBe('equivalent');
  });

  it('shows a run whose every row is masked as failed, and its masked rows one click away', async () => {
    const { page, errors } = await openPage(browser);
    await page.goto(dashboard.url);
    const dead = page.locator('tr[data-run="dead"]');
    expect(await dead.getAttribute('data-state')).toBe('failed');
    expect(await dead.locator('.done').textContent()).toBe('3/3 ✗ failed: every row masked');
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
