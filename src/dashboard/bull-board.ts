/**
 * Bull Board over every queue of the fleet (rollout, judge, results under the configured prefix),
 * served by the Hono adapter. Job data holds ids, agent outcomes and rows, never keys or images
 * (images are blobs by SHA-256); long strings (`response_tail` is up to 4000 characters) are
 * shortened for display only.
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { HonoAdapter } from '@bull-board/hono';
import { serveStatic } from '@hono/node-server/serve-static';
import type { Queue } from 'bullmq';
import type { Hono } from 'hono';

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
  /** Bull Board hides its write actions; the access guard refuses them anyway. */
  readOnly: boolean;
  title?: string;
}

/** Mount Bull Board over `queues` on `app` at `basePath`. */
export function mountBullBoard(app: Hono, queues: readonly Queue[], opts: BullBoardOptions): void {
  const adapters = queues.map((queue) => {
    const adapter = new BullMQAdapter(queue, { readOnlyMode: opts.readOnly, allowRetries: !opts.readOnly });
    adapter.setFormatter('data', (data) => trimForDisplay(data));
    adapter.setFormatter('returnValue', (data) => trimForDisplay(data));
    return adapter;
  });
  const serverAdapter = new HonoAdapter(serveStatic);
  serverAdapter.setBasePath(opts.basePath);
  createBullBoard({
    queues: adapters,
    // @bull-board/hono 9.10.1 pins its own copy of @bull-board/api's types; at run time it only uses
    // the IServerAdapter methods, which did not change between 9.10.1 and 9.10.2.
    serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
    options: { uiConfig: { boardTitle: opts.title ?? 'vcfleet', miscLinks: [{ text: 'Runs', url: '/' }] } },
  });
  app.route(opts.basePath, serverAdapter.registerPlugin());
}
