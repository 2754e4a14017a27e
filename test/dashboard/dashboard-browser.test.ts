/**
 * The dashboard in a real headless browser (Debian chromium through playwright-core): a run whose
 * one task fails for good on infrastructure leaves a failed rollout job and an infra_failed row; the
 * run overview shows it, Bull Board lists the fleet's queues and the failed job, and clicking
 * "retry" there while no sandbox-worker serves the run makes the run page say so; a healthy
 * sandbox-worker then completes the task and replaces its masked row.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { startDashboard, type Dashboard } from '../../src/dashboard/server.ts';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { announceWorker } from '../../src/shared/queue/worker-registry.ts';
import type { Row } from '../../src/shared/records/rows.ts';
import { readRowsStrict } from '../../src/shared/output/row-file.ts';
import { createScriptedAgent } from '../../src/agent/scripted-agent.ts';
import { launchBrowser } from '../helpers/browser.ts';
import { startInProcessFleet, type InProcessFleet } from '../helpers/in-process-fleet.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { FAKE_JUDGE_KEY, makeFleetEnv, waitFor, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

const readRows = (file: string): Row[] => readRowsStrict(file);

describe('vcfleet dashboard in a browser', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  let fleet: InProcessFleet;
  let browser: Browser | undefined;
  let dashboard: Dashboard | undefined;

  beforeAll(async () => {
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url, overrides: ['++queues.rollout_attempts=1', '++dashboard.port=0', '++run_id=dash'] });
    fleet = startInProcessFleet(env);
  });
  afterAll(async () => {
    await browser?.close();
    await dashboard?.close();
    await fleet?.close();
    await env?.cleanup();
    removeTmpDirs();
  });

  it('shows the failed rollout, retries it from Bull Board, and the task gets its row', async () => {
    const config = env.config();
    await fleet.produce();
    const failing = env.fixture.expected[0].task_id;
    const failingRollout = `dash-${failing}-0`;
    const broken = await fleet.sandbox(createScriptedAgent({ '*': { answer: '@gold' }, [failing]: { answer: '@gold', infra_fail_attempts: 99 } }));
    await fleet.judge();
    await fleet.results();
    // The workers' records, as `vcfleet worker` keeps them: who serves the fleet's queues.
    const presences = { judge: await announceWorker(fleet.worker, env.prefix, 'judge'), results: await announceWorker(fleet.worker, env.prefix, 'results') };
    let sandboxPresence = await announceWorker(fleet.worker, env.prefix, 'sandbox');
    const masked = await waitFor('3 rows, one infra_failed', () => {
      const rows = readRows(env.output);
      return rows.length === 3 ? rows.find((r) => r.rollout_id === failingRollout) : undefined;
    });
    expect(masked).toMatchObject({ failure_kind: 'infra_failed', reward: null });
    const rollout = openQueue('rollout', fleet.client, env.prefix);
    expect(await rollout.getFailedCount()).toBe(1);

    dashboard = await startDashboard({ config, logger: env.logger, redis: fleet.worker });
    browser = await launchBrowser();
    const page = await browser.newPage();

    // The run overview: done, accuracy so far, masked and failed jobs of the run.
    await page.goto(dashboard.url);
    const runRow = page.locator('tr[data-run="dash"]');
    await runRow.waitFor();
    expect(await runRow.locator('.done').textContent()).toContain('3/3');
    expect(await runRow.locator('.accuracy').textContent()).toContain('100.0%');
    expect(await runRow.locator('.masked').textContent()).toContain('infra_failed 1');
    expect(await runRow.locator('.failed').textContent()).toContain('rollout 1');

    // Bull Board: every queue of the fleet, and the failed job with its (secret-free) data.
    await page.getByRole('link', { name: 'queues (Bull Board)' }).click();
    for (const name of ['rollout', 'judge', 'results']) await page.getByText(name, { exact: true }).first().waitFor();
    await page.goto(`${dashboard.url}queues/queue/rollout?status=failed`);
    await page.getByText(failingRollout).first().waitFor();
    await page.getByText('scripted infrastructure failure').first().waitFor();
    await page.getByRole('tab', { name: 'Data' }).first().click();
    await page.getByText(/task_id/).first().waitFor();
    const shown = (await page.locator('body').innerText()).replace(/\s+/g, '');
    expect(shown).toContain(`task_id:"${failing}"`);
    expect(shown).toContain(`rollout_id:"${failingRollout}"`);
    expect(await page.content()).not.toContain(FAKE_JUDGE_KEY);

    // Retried while no sandbox-worker serves the run: the run page says so, and how to start one.
    await fleet.stop(broken);
    await sandboxPresence.stop();
    await page.locator('ul[class*="jobActions"] button:has(svg.lucide-refresh-cw)').first().click();
    await page.getByRole('button', { name: 'Confirm' }).click();
    await waitFor('the retried job to wait in the rollout queue', async () => (await rollout.getWaitingCount()) === 1);
    await page.goto(dashboard.url);
    expect(await page.locator('tr[data-run="dash"] .unserved').textContent()).toContain('no worker serves sandbox of this run');
    await page.locator('tr[data-run="dash"] a.run-page').click();
    const notice = page.locator('.notices');
    await notice.waitFor();
    expect(await notice.textContent()).toMatch(/^1 job\(s\) of this run queued; live workers serve only judge by [^;]+; results by [^;]+; no worker serves sandbox of this run: start one \(vcfleet worker sandbox\|judge\|results, or vcfleet run --run-id dash\)$/);

    // The infrastructure is fixed: a healthy sandbox-worker takes the retried job.
    await fleet.sandbox(createScriptedAgent({ '*': { answer: '@gold' } }));
    sandboxPresence = await announceWorker(fleet.worker, env.prefix, 'sandbox');

    const fixed = await waitFor('the retried rollout to replace its masked row', () => {
      const row = readRows(env.output).find((r) => r.rollout_id === failingRollout);
      return row && row.failure_kind === null ? row : undefined;
    }, 30_000);
    expect(fixed).toMatchObject({ reward: 1, judge_verdict: 'equivalent', stop_reason: 'answered', failure_kind: null });
    expect(readRows(env.output)).toHaveLength(3);
    expect(await rollout.getFailedCount()).toBe(0);
    await rollout.close();
    await page.reload();
    await page.locator('h1').waitFor();
    expect(await page.locator('.notices').count()).toBe(0);
    for (const p of [presences.judge, presences.results, sandboxPresence]) await p.stop();

    const api = await (await fetch(`${dashboard.url}api/runs`)).json();
    expect(api.runs[0]).toMatchObject({ run_id: 'dash', done: 3, total: 3, scored: 3, correct: 3, accuracy: 1, masked: {}, failed: { rollout: 0, judge: 0, results: 0 } });
  });
});
