/**
 * The metrics of one long-running role: its `FleetMetrics` hooks, and the `/metrics` server when
 * `metrics_server.port` is set (0 = off: the hooks still count, nobody serves them).
 */
import type { Config } from '../shared/config/load.ts';
import type { Logger } from '../shared/logger.ts';
import { listenMetrics, type MetricsServer } from './metrics-server.ts';
import { createFleetMetrics } from './prom-metrics.ts';
import type { FleetMetrics } from '../shared/ports/telemetry.ts';

export interface RoleMetrics {
  metrics: FleetMetrics;
  /** null when `metrics_server.port` is 0. */
  server: MetricsServer | null;
  /** Stop serving and release the queue-depth readers. Safe to call twice. */
  close(): Promise<void>;
}

export async function startRoleMetrics(config: Config, logger: Logger, role: string): Promise<RoleMetrics> {
  const metrics = createFleetMetrics({ role });
  const { host, port } = config.metrics_server;
  const server = port > 0 ? await listenMetrics(metrics.registry, host, port) : null;
  if (server) logger.info({ url: server.url }, 'serving Prometheus metrics');
  let closing: Promise<void> | undefined;
  return {
    metrics,
    server,
    close() {
      closing ??= (async () => {
        await server?.close();
        await metrics.close();
      })();
      return closing;
    },
  };
}
