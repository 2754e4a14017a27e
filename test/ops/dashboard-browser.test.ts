/**
 * The dashboard in a real headless browser (Debian chromium through playwright-core): a run whose
 * one task fails for good on infrastructure leaves a failed rollout job and an infra_failed row; the
 * run overview shows it, Bull Board lists the fleet's queues and the failed job, and clicking
 * "retry" there (after swapping in a healthy agent) completes the task and replaces its masked row.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { startDashboard, type Dashboard } from '../../src/dashboard/server.ts';
import { produceRun } from '../../src/producer/produce.ts';
import { loadOrPrepare } from '../../src/prepare/load-or-prepare.ts';
import { openQueue } from '../../src/shared/queues.ts';
import { createRedis, type Redis } from '../../src/shared/redis.ts';
import type { Row } from '../../src/shared/rows.ts';
import { readRowsStrict } from '../../src/shared/output/row-file.ts';
import type { StageWorker } from '../../src/shared/stage-worker.ts';
import { createFleetJudge } from '../../src/workers/judge/judge-factory.ts';
import { startJudgeWorker } from '../../src/workers/judge/worker.ts';
import { startResultsWorker, type ResultsWorker } from '../../src/workers/results/worker.ts';
import { createScriptedAgent } from '../../src/workers/sandbox/scripted-agent.ts';
import { startSandboxWorker } from '../../src/workers/sandbox/worker.ts';
import { startScriptedJudgeServer, type ScriptedJudgeServer } from '../helpers/scripted-judge-server.ts';
import { FAKE_JUDGE_KEY, makeFleetEnv, REDIS_URL, waitFor, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'];

const readRows = (file: string): Row[] => readRowsStrict(file);

describe('vcfleet dashboard in a browser', () => {
  let judge: ScriptedJudgeServer;
  let env: FleetEnv;
  let worker: Redis;
  let client: Redis;
  let browser: Browser | undefined;
  let dashboard: Dashboard | undefined;
  const stages: Array<StageWorker | ResultsWorker> = [];

  beforeAll(async () => {
    judge = await startScriptedJudgeServer();
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url, overrides: ['++queues.rollout_attempts=1', '++dashboard.port=0', '++run_id=dash'] });
    worker = createRedis(REDIS_URL, 'worker');
    client = createRedis(REDIS_URL, 'client');
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

  it('shows the failed rollout, retries it from Bull Board, and the task gets its row', async () => {
    const config = env.config();
    const bench = await loadOrPrepare(config, env.logger);
    await produceRun({ config, redis: client, logger: env.logger, tasks: bench.tasks, readImage: bench.readImage });
    const failing = env.fixture.expected[0].task_id;
    const failingRollout = `dash-${failing}-0`;
    const broken = await startSandboxWorker({
      config, connection: worker, logger: env.logger,
      agent: createScriptedAgent({ '*': { answer: '@gold' }, [failing]: { answer: '@gold', infra_fail_attempts: 99 } }),
    });
    stages.push(broken);
    stages.push(await startJudgeWorker({ config, connection: worker, logger: env.logger, judge: createFleetJudge(config, env.logger, worker) }));
    const results = startResultsWorker({ config, connection: worker, logger: env.logger });
    stages.push(results);
    await results.ready;
    const masked = await waitFor('3 rows, one infra_failed', () => {
      const rows = readRows(env.output);
      return rows.length === 3 ? rows.find((r) => r.rollout_id === failingRollout) : undefined;
    });
    expect(masked).toMatchObject({ failure_kind: 'infra_failed', reward: null });
    const rollout = openQueue('rollout', client, env.prefix);
    expect(await rollout.getFailedCount()).toBe(1);

    dashboard = await startDashboard({ config, logger: env.logger, redis: worker });
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
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

    // The infrastructure is fixed: a healthy sandbox-worker replaces the broken one.
    await broken.close(1000);
    stages.push(await startSandboxWorker({ config, connection: worker, logger: env.logger, agent: createScriptedAgent({ '*': { answer: '@gold' } }) }));
    await page.locator('ul[class*="jobActions"] button:has(svg.lucide-refresh-cw)').first().click();
    await page.getByRole('button', { name: 'Confirm' }).click();

    const fixed = await waitFor('the retried rollout to replace its masked row', () => {
      const row = readRows(env.output).find((r) => r.rollout_id === failingRollout);
      return row && row.failure_kind === null ? row : undefined;
    }, 30_000);
    expect(fixed).toMatchObject({ reward: 1, judge_verdict: 'equivalent', stop_reason: 'answered', failure_kind: null });
    expect(readRows(env.output)).toHaveLength(3);
    expect(await rollout.getFailedCount()).toBe(0);
    await rollout.close();

    const api = await (await fetch(`${dashboard.url}api/runs`)).json();
    expect(api.runs[0]).toMatchObject({ run_id: 'dash', done: 3, total: 3, scored: 3, correct: 3, accuracy: 1, masked: {}, failed: { rollout: 0, judge: 0, results: 0 } });
  });
});
