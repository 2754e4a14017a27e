/**
 * `vcfleet view`'s server: the viewer app behind the dashboard's access guard, listening on one
 * address. Loopback is open to reads; any other address needs the dashboard's credentials (see
 * src/http/access.ts), checked before the port is opened.
 */
import { createAdaptorServer } from '@hono/node-server';
import { Hono } from 'hono';
import { accessGuard, accessPolicy, checkBind, type DashboardCredentials } from '../http/access.ts';
import { listen } from '../http/listen.ts';
import { createViewerApp, type ViewerAppOptions } from './app.ts';
import type { ViewerSource } from './source.ts';

export interface ViewerServerOptions extends ViewerAppOptions {
  /** Address to bind; anything but 127.0.0.1, ::1 or localhost needs `credentials`. */
  host: string;
  /** Port; 0 picks any free port (see `ViewerServer.port`). */
  port: number;
  /** The dashboard's credentials (basic auth or a bearer token); all null on an open loopback viewer. */
  credentials: DashboardCredentials;
}

export interface ViewerServer {
  /** `http://host:port<basePath>/`. */
  readonly url: string;
  readonly port: number;
  /** Stop listening and drop open connections. Safe to call twice. */
  close(): Promise<void>;
}

/** Check the bind address against the credentials (ConfigError when refused), then listen. */
export async function startViewerServer(source: ViewerSource, opts: ViewerServerOptions): Promise<ViewerServer> {
  checkBind(opts.host, opts.credentials);
  const root = new Hono();
  // The viewer only reads: read-only refuses any write with 403 whatever the credentials.
  root.use('*', accessGuard(accessPolicy(opts.host, opts.credentials, true)));
  root.route('/', createViewerApp(source, opts));
  // Browsers ask for it on their own; an empty answer keeps a 404 out of their consoles.
  root.get('/favicon.ico', (c) => c.body(null, 204));
  const server = await listen(createAdaptorServer({ fetch: root.fetch }), opts.host, opts.port);
  return { url: `${server.origin}${opts.basePath ?? ''}/`, port: server.port, close: server.close };
}
