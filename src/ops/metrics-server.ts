/**
 * The `/metrics` endpoint of a long-running role: a plain node:http server on
 * `metrics_server.{host,port}` that renders one prom-client registry. Port 0 in the config means off
 * (see `startRoleMetrics`); `listenMetrics` itself also accepts 0 (any free port) for tests.
 */
import http from 'node:http';
import type { Registry } from 'prom-client';
import { listen } from '../http/listen.ts';

export interface MetricsServer {
  /** `http://host:port/metrics`. */
  readonly url: string;
  readonly port: number;
  /** Stop listening and drop open connections. Safe to call twice. */
  close(): Promise<void>;
}

export async function listenMetrics(registry: Registry, host: string, port: number): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: scrape /metrics\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(req.method === 'HEAD' ? undefined : text),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`cannot collect metrics: ${err.message}\n`),
    );
  });
  const listening = await listen(server, host, port);
  return { url: `${listening.origin}/metrics`, port: listening.port, close: listening.close };
}
