/**
 * Bull Board's page as the dashboard serves it: nothing loaded from outside (its Google Fonts link is
 * replaced by the IBM Plex fonts of @fontsource, served here at FONTS_PATH), queue names in the menu
 * wrapped instead of cut, and a link back to the run overview. An offline tool loads nothing from
 * the internet.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Hono, MiddlewareHandler } from 'hono';

/** Where the dashboard serves the fonts (the stylesheet at `${FONTS_PATH}/plex.css`). */
export const FONTS_PATH = '/assets/fonts';

const require = createRequire(import.meta.url);
/** The weights Bull Board asks Google for: Plex Sans 400/500/600, Plex Mono 400/500. */
const FACES: Array<[pkg: string, weight: string]> = [
  ['@fontsource/ibm-plex-sans', '400'], ['@fontsource/ibm-plex-sans', '500'], ['@fontsource/ibm-plex-sans', '600'],
  ['@fontsource/ibm-plex-mono', '400'], ['@fontsource/ibm-plex-mono', '500'],
];
const GOOGLE_FONTS = /<link[^>]+href="https:\/\/fonts\.googleapis\.com\/[^"]*"[^>]*>/g;

function packageDir(pkg: string): string {
  return path.dirname(require.resolve(`${pkg}/package.json`));
}

/** The fonts' stylesheet, each face's files named under FONTS_PATH/<package folder>/. */
async function fontsCss(): Promise<string> {
  const parts = await Promise.all(FACES.map(async ([pkg, weight]) => {
    const css = await readFile(path.join(packageDir(pkg), `${weight}.css`), 'utf8');
    return css.replace(/url\(\.\/files\//g, `url(${FONTS_PATH}/${path.basename(pkg)}/`);
  }));
  return parts.join('\n');
}

/** What the board's page gets instead of the Google Fonts link: the local fonts, wrapped queue names, a link to the runs. */
const HEAD_EXTRA =
  `<link href="${FONTS_PATH}/plex.css" rel="stylesheet">` +
  '<style>[class*="menu-"] [class*="queueName-"],[class*="menu-"] [class*="groupName-"]{white-space:normal!important;overflow-wrap:anywhere;text-overflow:clip!important}</style>';

/** Serve the fonts at FONTS_PATH (woff2/woff files of the two @fontsource packages only). */
export function serveLocalFonts(app: Hono): void {
  let css: Promise<string> | undefined;
  app.get(`${FONTS_PATH}/plex.css`, async (c) => c.body(await (css ??= fontsCss()), 200, { 'content-type': 'text/css; charset=utf-8', 'cache-control': 'max-age=86400' }));
  app.get(`${FONTS_PATH}/:family/:file`, async (c) => {
    const { family, file } = c.req.param();
    const pkg = FACES.find(([p]) => path.basename(p) === family)?.[0];
    if (!pkg || !/^[\w-]+\.woff2?$/.test(file)) return c.body(null, 404);
    const body = await readFile(path.join(packageDir(pkg), 'files', file)).catch(() => null);
    if (!body) return c.body(null, 404);
    return c.body(new Uint8Array(body), 200, { 'content-type': file.endsWith('2') ? 'font/woff2' : 'font/woff', 'cache-control': 'max-age=86400' });
  });
}

/** Middleware for the board's routes: its HTML page with the Google Fonts link replaced. */
export function boardPageRewrite(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    if (!c.res.headers.get('content-type')?.includes('text/html')) return;
    const html = await c.res.text();
    const headers = new Headers(c.res.headers);
    headers.delete('content-length');
    c.res = new Response(html.replace(GOOGLE_FONTS, HEAD_EXTRA), { status: c.res.status, headers });
  };
}
