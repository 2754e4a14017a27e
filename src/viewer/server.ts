/**
 * `vcfleet view`'s server: the viewer app behind the dashboard's access guard, listening on one
 * address. Loopback is open to reads; any other address needs the dashboard's credentials (see
 * src/http/access.ts), checked before the port is opened.
 */
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { Hono } from 'hono';
import { accessGuard, accessPolicy, checkBind, type DashboardCredentials } from '../http/access.ts';
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
  const server = createAdaptorServer({ fetch: root.fetch });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}${opts.basePath ?? ''}/`,
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
      return closing;
    },
  };
}
