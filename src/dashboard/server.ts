/**
 * `vcfleet dashboard`: one Hono app on `dashboard.{host,port}` with
 * - `/` (and `/runs`): the run overview, server-rendered HTML;
 * - `/api/runs`: the same as JSON; `/api/runs/:id`: the full `runStatus` of one run;
 * - `/queues`: Bull Board over the rollout, judge and results queues, each job linked to its rollout;
 * - `/viewer`: the rollout viewer (src/viewer/) over the runs in Redis (redis-viewer-source.ts).
 * Every request passes the access guard (http/access.ts) first.
 */
import { createAdaptorServer } from '@hono/node-server';
import type { Queue } from 'bullmq';
import { Hono } from 'hono';
import type { Redis } from 'ioredis';
import type { Config } from '../shared/config/load.ts';
import { errorMessage, PoisonJobError } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { runStatus } from '../ops/run-status.ts';
import { RunStore } from '../shared/stores/run-store.ts';
import { createViewerApp } from '../viewer/app.ts';
import { readPublishedResults } from '../shared/output/published-results.ts';
import { accessGuard, accessPolicy, checkBind } from '../http/access.ts';
import { listen, type Listening } from '../http/listen.ts';
import { mountBullBoard } from './bull-board.ts';
import { BoardQueues } from './board-queues.ts';
import { listWorkers } from '../shared/queue/worker-registry.ts';
import { renderOverviewPage } from './overview-page.ts';
import { createRedisViewerSource } from './redis-viewer-source.ts';
import { runOverview } from './run-overview.ts';

/** Where Bull Board lives on the dashboard. */
export const BOARD_PATH = '/queues';
/** How often the board looks for the queues of new runs (ms). */
const BOARD_REFRESH_MS = 15_000;
/** Where the rollout viewer lives on the dashboard. */
export const VIEWER_PATH = '/viewer';
/** Puzzle images the viewer keeps in memory (bytes; each is read from Redis once). */
const VIEWER_IMAGE_CACHE_BYTES = 64 * 1024 * 1024;

export interface DashboardDeps {
  /** `dashboard.*` and `queues.prefix` are read from it. */
  config: Config;
  logger: Logger;
  /** A worker connection (waits out Redis outages); the caller owns and closes it. */
  redis: Redis;
}

export interface Dashboard {
  /** `http://host:port/`. */
  readonly url: string;
  readonly port: number;
  /** Stop listening, drop connections, close the board's queues. Safe to call twice. */
  close(): Promise<void>;
}

/** The rollout viewer over the runs in Redis, at VIEWER_PATH, with the viewer's own headers (its CSP). */
function viewerApp({ config, logger, redis }: DashboardDeps): Hono {
  const prefix = config.queues.prefix;
  const store = new RunStore(redis, prefix, { cache: true, cacheImageBytes: VIEWER_IMAGE_CACHE_BYTES });
  const source = createRedisViewerSource({ store, output: config, maxRuns: config.dashboard.max_runs });
  return createViewerApp(source, {
    basePath: VIEWER_PATH,
    title: `vcfleet rollouts (${prefix})`,
    published: readPublishedResults(config.report.published_results),
    links: [{ href: '/', text: '← Runs (dashboard)' }, { href: `${BOARD_PATH}`, text: 'Queues' }],
    onError: (err, path) => logger.error({ path, err: errorMessage(err) }, 'viewer request failed'),
  });
}

/** The Hono app, without listening (tests may call `app.request`); `setQueues` changes the queues the board shows. */
export function buildDashboardApp(deps: DashboardDeps, queues: readonly Queue[]): { app: Hono; setQueues(queues: readonly Queue[]): void } {
  const { config, logger, redis } = deps;
  const d = config.dashboard;
  const prefix = config.queues.prefix;
  const app = new Hono();
  app.use('*', accessGuard(accessPolicy(d.host, { user: d.user, password: d.password, token: d.token }, d.read_only)));
  const overview = async () => runOverview(redis, prefix, d.max_runs);
  app.get('/', async (c) =>
    c.html(renderOverviewPage(await overview(), { boardPath: BOARD_PATH, viewerPath: VIEWER_PATH, prefix, readOnly: d.read_only }, await listWorkers(redis, prefix))));
  app.get('/api/workers', async (c) => c.json(await listWorkers(redis, prefix)));
  app.get('/runs', (c) => c.redirect('/'));
  app.get('/api/runs', async (c) => c.json({ prefix, read_only: d.read_only, runs: await overview() }));
  app.get('/api/runs/:id', async (c) => {
    try {
      return c.json(await runStatus(redis, prefix, c.req.param('id')));
    } catch (err) {
      if (err instanceof PoisonJobError) return c.json({ error: err.message }, 404);
      throw err;
    }
  });
  const setQueues = mountBullBoard(app, queues, { basePath: BOARD_PATH, viewerPath: VIEWER_PATH, readOnly: d.read_only, title: `vcfleet (${prefix})` });
  app.route('/', viewerApp(deps));
  // Browsers ask for it on their own; an empty answer keeps a 404 out of their consoles.
  app.get('/favicon.ico', (c) => c.body(null, 204));
  app.onError((err, c) => {
    logger.error({ path: c.req.path, err: errorMessage(err) }, 'dashboard request failed');
    return c.json({ error: errorMessage(err) }, 500);
  });
  return { app, setQueues };
}

/** Check the bind address against the credentials, then listen. Throws ConfigError when refused. */
export async function startDashboard(deps: DashboardDeps): Promise<Dashboard> {
  const d = deps.config.dashboard;
  checkBind(d.host, { user: d.user, password: d.password, token: d.token });
  const board = new BoardQueues(deps.redis, deps.config.queues.prefix, d.max_runs);
  const { app, setQueues } = buildDashboardApp(deps, await board.refresh());
  // Runs with queues of their own come and go: the board follows the recent ones.
  const refresh = setInterval(() => void board.refresh().then(setQueues, (err: unknown) => deps.logger.warn({ err: errorMessage(err) }, 'cannot refresh the board\'s queues')), BOARD_REFRESH_MS);
  refresh.unref();
  let server: Listening;
  try {
    server = await listen(createAdaptorServer({ fetch: app.fetch }), d.host, d.port);
  } catch (err) {
    clearInterval(refresh);
    await board.close();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    url: `${server.origin}/`,
    port: server.port,
    close() {
      closing ??= (async () => {
        await server.close();
        clearInterval(refresh);
        await board.close();
      })();
      return closing;
    },
  };
}
