/**
 * The rollout viewer as a Hono app over a `ViewerSource`. Its routes live under `basePath`:
 *
 *   /                               the runs of the source
 *   /runs/:run                      a run: headline metrics, charts, the rollout table
 *   /runs/:run/rollouts/:rollout    one rollout: the puzzle, every turn, the verdict
 *   /compare?a=RUN&b=RUN            run B against run A: per-type chart, the flipped puzzles
 *   /api/runs, /api/runs/:run, /api/runs/:run/rows, /api/runs/:run/rollouts/:rollout, /api/compare   JSON
 *   /images/:sha256                 an image, by SHA-256 only (PNG, JPEG, GIF, WebP)
 *   /assets/viewer.js, /assets/viewer.css
 *
 * Access control is the host's: `vcfleet view` puts the dashboard's access guard in front, and the
 * dashboard mounts this app behind its own guard.
 */
import { Hono, type Context } from 'hono';
import { DataError, errorMessage } from '../shared/errors.ts';
import { readPublishedResults, type PublishedRow } from '../shared/output/published-results.ts';
import { comparePayload } from './compare-api.ts';
import { clientAssets } from './client-assets.ts';
import { securityHeaders } from './http-headers.ts';
import { servedImageMime } from './image-mime.ts';
import { renderPageShell, type ShellLink } from './page-shell.ts';
import { runView } from './run-view.ts';
import { SHA256_PATTERN, type ViewerSource } from './source.ts';

export interface ViewerAppOptions {
  /** Path the viewer's routes live under, e.g. `/viewer`; `''` (the default) is the root. No trailing slash. */
  basePath?: string;
  /** Title of the pages (default `vcfleet rollouts`). */
  title?: string;
  /** Published results shown beside a run's paper table (default: `configs/published_results.yaml`). */
  published?: readonly PublishedRow[];
  /** Links shown above every page (the dashboard's: back to its run overview, to its queues). */
  links?: readonly ShellLink[];
  /** Told of every error the app answers with HTTP 500 (e.g. to log it); the default does nothing. */
  onError?: (err: unknown, path: string) => void;
}

function checkBasePath(basePath: string): string {
  if (basePath !== '' && !/^(\/[A-Za-z0-9._~-]+)+$/.test(basePath)) {
    throw new Error(`viewer basePath must be '' or like '/viewer' (no trailing slash, plain path segments), not "${basePath}"`);
  }
  return basePath;
}

const noStore = { 'Cache-Control': 'no-store' };

async function serveImage(c: Context, source: ViewerSource): Promise<Response> {
  const sha = c.req.param('sha') ?? '';
  if (!SHA256_PATTERN.test(sha)) return c.text('an image is named by its SHA-256: 64 lowercase hex digits\n', 400);
  const bytes = await source.image(sha);
  if (!bytes) return c.text(`no image ${sha} here\n`, 404);
  const mime = servedImageMime(bytes);
  if (!mime) return c.text(`image ${sha} is not a PNG, JPEG, GIF or WebP file; not served\n`, 415);
  return c.body(new Uint8Array(bytes), 200, { 'Content-Type': mime, 'Cache-Control': 'private, max-age=31536000, immutable' });
}

/** The viewer app; its routes include `basePath`, so a host app mounts it with `host.route('/', app)`. */
export function createViewerApp(source: ViewerSource, options: ViewerAppOptions = {}): Hono {
  const basePath = checkBasePath(options.basePath ?? '');
  const title = options.title ?? 'vcfleet rollouts';
  const published = options.published ?? readPublishedResults();
  const root = new Hono();
  // basePath() returns a view of `root` sharing its routes, so routes added to either are served.
  const app = basePath ? root.basePath(basePath) : root;
  // Start bundling now so the first page load does not wait for it; errors surface on that request.
  clientAssets().catch(() => undefined);
  app.use('*', securityHeaders());

  const shell = (c: Context) => c.html(renderPageShell(basePath, title, options.links), 200, noStore);
  app.get('/', shell);
  // Under a base path that route is the bare `/viewer`; the runs page is also `/viewer/` (the client's own links end in '/').
  if (basePath) root.get(`${basePath}/`, shell);
  app.get('/runs/:run', shell);
  app.get('/runs/:run/rollouts/:rollout', shell);
  app.get('/compare', shell);

  app.get('/assets/viewer.js', async (c) => c.body((await clientAssets()).script, 200, { 'Content-Type': 'text/javascript; charset=utf-8', ...noStore }));
  app.get('/assets/viewer.css', async (c) => c.body((await clientAssets()).css, 200, { 'Content-Type': 'text/css; charset=utf-8', ...noStore }));

  app.get('/api/runs', async (c) => c.json({ runs: await source.runs() }, 200, noStore));
  app.get('/api/runs/:run', async (c) => {
    const run = await source.run(c.req.param('run'));
    if (!run) return c.json({ error: `no run "${c.req.param('run')}" here` }, 404);
    return c.json({ meta: run.meta, metrics: run.metrics, view: runView(run.rows), published }, 200, noStore);
  });
  app.get('/api/runs/:run/rows', async (c) => {
    const run = await source.run(c.req.param('run'));
    if (!run) return c.json({ error: `no run "${c.req.param('run')}" here` }, 404);
    return c.json({ rows: run.rows }, 200, noStore);
  });
  app.get('/api/runs/:run/rollouts/:rollout', async (c) => {
    const { run, rollout } = c.req.param();
    const data = await source.rollout(run, rollout);
    if (!data) return c.json({ error: `run "${run}" has no rollout "${rollout}"` }, 404);
    return c.json(data, 200, noStore);
  });
  app.get('/api/compare', async (c) => {
    try {
      return c.json(await comparePayload(source, c.req.query('a') ?? '', c.req.query('b') ?? ''), 200, noStore);
    } catch (err) {
      if (err instanceof DataError) return c.json({ error: err.message }, 400);
      throw err;
    }
  });
  app.get('/images/:sha', (c) => serveImage(c, source));

  app.onError((err, c) => {
    options.onError?.(err, c.req.path);
    return c.json({ error: errorMessage(err) }, 500);
  });
  return app;
}
