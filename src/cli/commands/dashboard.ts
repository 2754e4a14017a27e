/** `vcfleet dashboard`: the run overview, the rollout viewer over the runs in Redis and Bull Board, until stopped. */
import type { Command } from 'commander';
import type { Redis } from '../../shared/redis/connect.ts';
import { checkBind } from '../../http/access.ts';
import { startDashboard, BOARD_PATH, VIEWER_PATH } from '../../dashboard/server.ts';
import { startRoleMetrics } from '../../ops/role-metrics.ts';
import type { Cli } from '../context.ts';
import { portFlag, onShutdownSignals } from '../runtime.ts';
import { connectToRuns, type RunRedis } from '../run-redis.ts';

interface DashboardFlags {
  config?: string;
  host?: string;
  port?: string;
  readOnly?: boolean;
}

function flagsOf(opts: DashboardFlags): Record<string, unknown> {
  return { 'dashboard.host': opts.host, 'dashboard.port': portFlag(opts.port), 'dashboard.read_only': opts.readOnly ? true : undefined };
}

export function registerDashboard(program: Command, cli: Cli): void {
  program
    .command('dashboard')
    .description(`serve the run overview (/), the rollout viewer (${VIEWER_PATH}/) and Bull Board (${BOARD_PATH}) over the fleet's queues`)
    .option('--config <path>', 'config YAML')
    .option('--host <address>', 'address to bind (dashboard.host, default 127.0.0.1); any other address needs credentials')
    .option('--port <n>', 'port (dashboard.port, default 3000; 0 = any free port)')
    .option('--read-only', 'refuse every change (retry, remove, clean, pause...) with HTTP 403')
    .addHelpText(
      'after',
      '\nEnvironment: REDIS_URL; credentials VCFLEET_DASHBOARD_USER + VCFLEET_DASHBOARD_PASSWORD (basic auth) or\n' +
        'VCFLEET_DASHBOARD_TOKEN (bearer), required beyond 127.0.0.1 and for changes whenever set.\n' +
        'Prometheus: /metrics on metrics_server.port (VCFLEET_METRICS_PORT; 0 = off).',
    )
    .action(async (opts: DashboardFlags) => {
      const context = cli.context(opts, flagsOf(opts));
      const { logger } = context;
      let config = context.config;
      const d = config.dashboard;
      // Refuse an unprotected public bind before touching Redis or opening any port.
      checkBind(d.host, { user: d.user, password: d.password, token: d.token });
      const roleMetrics = await startRoleMetrics(config, logger, 'dashboard');
      let redis: Redis | undefined;
      let found: RunRedis & { where: string } | undefined;
      let dashboard: Awaited<ReturnType<typeof startDashboard>>;
      try {
        // The runs `vcfleet runs` lists: REDIS_URL, else this folder's private Redis when it has data.
        found = await connectToRuns(config, logger, 'worker');
        redis = found.redis;
        if (found.url) config = { ...config, redis_url: found.url };
        roleMetrics.metrics.watchQueues(redis, config.queues.prefix);
        dashboard = await startDashboard({ config, logger, redis });
      } catch (err) {
        await roleMetrics.close();
        await found?.close();
        throw err;
      }
      const conn = found;
      logger.info({ url: dashboard.url, prefix: config.queues.prefix, read_only: config.dashboard.read_only }, 'dashboard started');
      const root = dashboard.url.replace(/\/$/, '');
      process.stdout.write(`dashboard: ${dashboard.url} (rollouts: ${root}${VIEWER_PATH}/, queues: ${root}${BOARD_PATH}); runs in ${found.where}\n`);
      await new Promise<void>((resolve) => {
        onShutdownSignals(logger, async () => {
          await dashboard.close();
          await roleMetrics.close();
          await conn.close();
          resolve();
        }, { stopping: 'stopping the dashboard' });
      });
      logger.info('dashboard stopped');
    });
}
