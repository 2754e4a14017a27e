/**
 * The viewer app through `app.request` (no browser): its routes under a base path when mounted in a
 * host app, its headers (CSP, nosniff), images served by SHA-256 with the type their bytes show and
 * never as SVG or HTML, ids from the URL that cannot reach files, and a client bundle that never
 * writes HTML from data.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createViewerApp } from '../../src/viewer/app.ts';
import { createFileSource } from '../../src/viewer/file-source.ts';
import { servedImageMime } from '../../src/viewer/image-mime.ts';
import { CONTENT_SECURITY_POLICY } from '../../src/viewer/http-headers.ts';
import { FIXTURE_JPEG } from '../helpers/fixture-images.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';
import { writeViewerFixture, type ViewerFixture } from '../helpers/viewer-fixture.ts';

let f: ViewerFixture;
let host: Hono;
const ODD_RUN = 'run/with %2F odd?chars';

beforeAll(() => {
  f = writeViewerFixture(createTmpDir(), [
    { runId: 'r1', rollouts: [{ task_id: 't1', type: 'A', subtype: 'a', outcome: 'correct', script: 'crop' }] },
    { runId: ODD_RUN, rollouts: [{ task_id: 't/2', type: 'A', subtype: 'a', outcome: 'wrong' }] },
  ]);
  host = new Hono();
  host.get('/', (c) => c.text('the host app'));
  host.route('/', createViewerApp(createFileSource(f.jsonl), { basePath: '/viewer' }));
});
afterAll(() => removeTmpDirs());

const get = (url: string) => host.request(`http://127.0.0.1${url}`);

describe('viewer app', () => {
  it('lives under its base path inside a host app, with the same headers on every answer', async () => {
    expect(await (await get('/')).text()).toBe('the host app');
    expect((await get('/api/runs')).status).toBe(404);
    const page = await get('/viewer/runs/r1');
    const html = await page.text();
    expect(html).toContain('data-base="/viewer"');
    expect(html).toContain('<script type="module" src="/viewer/assets/viewer.js"></script>');
    expect(html).not.toContain('r1'); // no data in the HTML: the client fetches it
    for (const runs of [await get('/viewer/'), await get('/viewer')]) expect(await runs.text()).toContain('data-base="/viewer"');
    for (const res of [page, await get('/viewer/'), await get('/viewer/api/runs'), await get(`/viewer/images/${f.cropSha}`)]) {
      expect(res.headers.get('content-security-policy')).toBe(CONTENT_SECURITY_POLICY);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    }
    expect(CONTENT_SECURITY_POLICY).toContain("script-src 'self'");
    expect(CONTENT_SECURITY_POLICY).not.toContain('unsafe');
    expect(() => createViewerApp(createFileSource(f.jsonl), { basePath: 'viewer/' })).toThrow(/basePath must be/);
  });

  it('answers the JSON the pages draw from, ids with odd characters included', async () => {
    const runs = await (await get('/viewer/api/runs')).json();
    expect(runs.runs.map((r: { run_id: string }) => r.run_id).sort()).toEqual(['r1', ODD_RUN].sort());
    const run = await (await get(`/viewer/api/runs/${encodeURIComponent(ODD_RUN)}`)).json();
    expect(run.meta.run_id).toBe(ODD_RUN);
    expect(run.view.by_type).toEqual([expect.objectContaining({ name: 'A', scored: 1, correct: 0 })]);
    const rollout = await (await get(`/viewer/api/runs/${encodeURIComponent(ODD_RUN)}/rollouts/${encodeURIComponent(`${ODD_RUN}-t/2-0`)}`)).json();
    expect(rollout.row.task_id).toBe('t/2');
    expect(rollout.transcript.status).toBe('found');
    const rows = await (await get('/viewer/api/runs/r1/rows')).json();
    expect(rows.rows).toHaveLength(1);
  });

  it('finds nothing for ids that are paths, and says so', async () => {
    const traversal = await get(`/viewer/api/runs/r1/rollouts/${encodeURIComponent('../../run.jsonl')}`);
    expect(traversal.status).toBe(404);
    expect(await traversal.json()).toEqual({ error: 'run "r1" has no rollout "../../run.jsonl"' });
    expect((await get('/viewer/api/runs/..%2F..%2Fetc')).status).toBe(404);
    expect((await get('/viewer/images/..%2Frun.jsonl')).status).toBe(400);
    expect(await (await get(`/viewer/images/${f.cropSha.toUpperCase()}`)).text()).toMatch(/64 lowercase hex digits/);
  });

  it('serves images with the type their bytes show, and never SVG or HTML', async () => {
    const png = await get(`/viewer/images/${f.cropSha}`);
    expect(png.status).toBe(200);
    expect(png.headers.get('content-type')).toBe('image/png');
    const jpegSha = 'b'.repeat(64);
    writeFileSync(path.join(f.imagesDir, `${jpegSha}.png`), FIXTURE_JPEG); // misnamed: the bytes decide
    expect((await get(`/viewer/images/${jpegSha}`)).headers.get('content-type')).toBe('image/jpeg');
    const svgSha = 'c'.repeat(64);
    writeFileSync(path.join(f.imagesDir, `${svgSha}.png`), '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>');
    const svg = await get(`/viewer/images/${svgSha}`);
    expect(svg.status).toBe(415);
    expect(svg.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await svg.text()).not.toContain('<svg');
    expect((await get(`/viewer/images/${'d'.repeat(64)}`)).status).toBe(404);
    expect(servedImageMime(new Uint8Array(Buffer.from('GIF89a...')))).toBe('image/gif');
    expect(servedImageMime(new Uint8Array(Buffer.from('RIFF\0\0\0\0WEBPVP8 ')))).toBe('image/webp');
    expect(servedImageMime(new Uint8Array(Buffer.from('RIFF\0\0\0\0WAVE')))).toBeNull();
  });

  it('bundles a client that builds the DOM from data without HTML strings', async () => {
    const js = await get('/viewer/assets/viewer.js');
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    const code = await js.text();
    expect(code).toContain('document.body.dataset.ready'); // the entry point is in the bundle
    for (const sink of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'new Function']) expect(code).not.toContain(sink);
    expect((await get('/viewer/assets/viewer.css')).headers.get('content-type')).toBe('text/css; charset=utf-8');
  });
});
