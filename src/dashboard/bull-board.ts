/**
 * Bull Board over every queue of the fleet (rollout, judge, results under the configured prefix),
 * served by the Hono adapter. Job data holds ids, agent outcomes and rows, never keys or images
 * (images are blobs by SHA-256); long strings (`response_tail` is up to 4000 characters) are
 * shortened for display only. Each job's card links to its rollout's viewer page (the board's
 * `externalJobUrl`, drawn as a link in the card's header), and the board's menu to the viewer.
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { HonoAdapter } from '@bull-board/hono';
import { serveStatic } from '@hono/node-server/serve-static';
import type { Queue } from 'bullmq';
import type { Hono } from 'hono';
import { jobRolloutUrl } from './viewer-links.ts';
import { boardPageRewrite, serveLocalFonts } from './board-page.ts';

type JobUrl = NonNullable<ConstructorParameters<typeof BullMQAdapter>[1]>['externalJobUrl'];

/** Strings longer than this are cut in the job views (characters). */
export const MAX_SHOWN_CHARS = 600;

/** A copy of job data with every long string shortened; the job itself is untouched. */
export function trimForDisplay(value: unknown, max = MAX_SHOWN_CHARS): unknown {
  if (typeof value === 'string') {
    return value.length > max ? `${value.slice(0, max)}… (${value.length - max} more characters)` : value;
  }
  if (Array.isArray(value)) return value.map((v) => trimForDisplay(v, max));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, trimForDisplay(v, max)]));
  }
  return value;
}

export interface BullBoardOptions {
  /** Where the board is mounted, e.g. `/queues`. */
  basePath: string;
  /** Where the rollout viewer is mounted, e.g. `/viewer`: jobs link to their rollout page under it. */
  viewerPath: string;
  /** Bull Board hides its write actions; the access guard refuses them anyway. */
  readOnly: boolean;
  title?: string;
}

/** Mount Bull Board over `queues` on `app` at `basePath`; returns how to change the queues it shows. */
export function mountBullBoard(app: Hono, queues: readonly Queue[], opts: BullBoardOptions): (queues: readonly Queue[]) => void {
  // The board draws no link when this answers undefined (a job whose data names no rollout), though its type says it always answers.
  const externalJobUrl = ((job) => {
    const href = jobRolloutUrl(opts.viewerPath, job.data);
    return href ? { href, displayText: 'rollout page' } : undefined;
  }) as JobUrl;
  const adapt = (queue: Queue) => {
    // `rollout.<run id>`: grouped in the menu by stage (the delimiter), each run's queue under it by its id.
    const adapter = new BullMQAdapter(queue, { readOnlyMode: opts.readOnly, allowRetries: !opts.readOnly, externalJobUrl, delimiter: '.' });
    adapter.setFormatter('data', (data) => trimForDisplay(data));
    adapter.setFormatter('returnValue', (data) => trimForDisplay(data));
    return adapter;
  };
  const serverAdapter = new HonoAdapter(serveStatic);
  serverAdapter.setBasePath(opts.basePath);
  const board = createBullBoard({
    queues: queues.map(adapt),
    // @bull-board/hono 9.10.1 pins its own copy of @bull-board/api's types; at run time it only uses
    // the IServerAdapter methods, which did not change between 9.10.1 and 9.10.2.
    serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
    options: { uiConfig: { boardTitle: opts.title ?? 'vcfleet', miscLinks: [{ text: 'Runs', url: '/' }, { text: 'Rollouts', url: `${opts.viewerPath}/` }] } },
  });
  // Its page loads nothing from outside: the fonts are served here (board-page.ts).
  serveLocalFonts(app);
  app.use(opts.basePath, boardPageRewrite());
  app.use(`${opts.basePath}/*`, boardPageRewrite());
  app.route(opts.basePath, serverAdapter.registerPlugin());
  return (next) => board.replaceQueues(next.map(adapt));
}
