/**
 * The dashboard and its viewer load nothing from outside, in a real headless browser (Debian
 * chromium) whose every request is routed through the test: any request to a host that is not
 * loopback is recorded and refused, and none may be attempted. Bull Board's fonts come from the
 * dashboard itself; a run's queues are listed under their stage with the run id whole; the overview
 * links to the viewer and the viewer back to the overview.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { runAll } from '../../src/all-in-one/run-all.ts';
import { createScriptedAgent } from '../../src/agent/scripted-agent.ts';
import { startDashboard, type Dashboard } from '../../src/dashboard/server.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { launchBrowser } from '../helpers/browser.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { makeFleetEnv, REDIS_URL, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

const RUN_ID = 'offline-babyvision-opencode-20261203-084500-ab12';
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

describe('the dashboard loads nothing from outside', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  let redis: Redis;
  let browser: Browser | undefined;
  let dashboard: Dashboard | undefined;
  beforeAll(async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url, overrides: ['++dashboard.port=0'] });
    const quiet = { update() {}, stop() {} };
    const run = await runAll({ config: env.config([`++run_id=${RUN_ID}`]), logger: env.logger, agent: createScriptedAgent({ '*': { answer: '@gold' } }), progress: quiet });
    expect(run.status).toBe('complete');
    redis = createRedis(REDIS_URL, 'worker');
    dashboard = await startDashboard({ config: env.config(), logger: env.logger, redis });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await dashboard?.close();
    redis?.disconnect();
    await env?.cleanup();
    removeTmpDirs();
  });

  it('overview, Bull Board and the viewer: no request leaves loopback; fonts served locally; names whole; links both ways', async () => {
    browser = await launchBrowser();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const outside: string[] = [];
    const fonts: string[] = [];
    await context.route('**/*', async (route) => {
      const url = new URL(route.request().url());
      if (url.protocol === 'data:' || url.protocol === 'blob:') return route.continue();
      if (!LOOPBACK.has(url.hostname)) {
        outside.push(url.href);
        return route.abort('blockedbyclient');
      }
      if (url.pathname.startsWith('/assets/fonts/')) fonts.push(url.pathname);
      return route.continue();
    });
    const page = await context.newPage();
    const root = dashboard!.url.replace(/\/$/, '');

    await page.goto(`${root}/`, { waitUntil: 'networkidle' });
    await page.goto(`${root}/queues`, { waitUntil: 'networkidle' });
    // The run's own queues, grouped under their stage, the run id shown whole (not cut with an ellipsis).
    const name = page.getByText(RUN_ID, { exact: true }).first();
    await name.waitFor({ timeout: 30_000 });
    expect(await name.evaluate((el) => el.scrollWidth <= el.clientWidth + 1), await name.evaluate((el) => el.outerHTML)).toBe(true);
    expect(fonts).toContain('/assets/fonts/plex.css');
    // The board's font is there, loaded from the dashboard.
    expect(await page.evaluate(async () => (await document.fonts.load('500 14px "IBM Plex Sans"')).length)).toBeGreaterThan(0);
    expect(fonts.some((f) => /^\/assets\/fonts\/ibm-plex-sans\/.+\.woff2$/.test(f)), fonts.join()).toBe(true);

    await page.goto(`${root}/viewer/`, { waitUntil: 'networkidle' });
    await page.waitForSelector('body[data-ready="true"]');
    // The viewer links back to the overview.
    await Promise.all([page.waitForURL(`${root}/`), page.getByRole('link', { name: /Runs \(dashboard\)/ }).click()]);
    await page.getByRole('link', { name: /rollouts \(viewer\)/ }).waitFor();
    expect(outside).toEqual([]);
    await context.close();
  }, 120_000);
});
