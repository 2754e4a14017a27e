/**
 * `vcfleet serve`: the fleet as a rollout service speaking NeMo Gym's `POST /run`, for a trainer. One
 * run per service (`--run-id` shares or resumes one), served by `vcfleet worker <role> --run-id` on
 * any host, or by this process's own roles with `--with-workers`.
 */
import type { Command } from 'commander';
import { ConfigError } from '../../shared/errors.ts';
import { InFlightJobs } from '../../shared/queue/in-flight-jobs.ts';
import type { Redis } from '../../shared/redis/connect.ts';
import { Releasers } from '../../shared/releasers.ts';
import { WORKER_ROLES } from '../../shared/queue/worker-registry.ts';
import { wordList } from '../word-list.ts';
import { addressAllowlist, checkBind, hasCredentials, isLoopback } from '../../http/access.ts';
import { planServiceRun, storeServiceRun } from '../../producer/produce.ts';
import { askedRunSettings, holdRunSettings } from '../../ops/asked-settings.ts';
import { RunStore, runSettings } from '../../shared/stores/run-store.ts';
import { preflightRoles } from '../../workers/process-roles.ts';
import { RolloutService } from '../../serve/rollout-service.ts';
import { startServeServer } from '../../serve/server.ts';
import { startServeWorkers } from '../../serve/with-workers.ts';
import type { Cli } from '../context.ts';
import { portFlag, exitSoon, onShutdownSignals } from '../runtime.ts';
import { connectToRuns } from '../run-redis.ts';
import { vcfleetCommand } from '../../shared/text/advice.ts';
import { SETTINGS_HELP } from '../usage-hints.ts';

interface ServeFlags {
  config?: string;
  host?: string;
  port?: string;
  runId?: string;
  withWorkers?: boolean;
  updateSettings?: boolean;
}

function flagsOf(opts: ServeFlags): Record<string, unknown> {
  return { 'serve.host': opts.host, 'serve.port': portFlag(opts.port), run_id: opts.runId };
}

export function registerServe(program: Command, cli: Cli): void {
  program
    .command('serve')
    .description("serve rollouts over HTTP as NeMo Gym's agent servers do: POST /run, GET and DELETE /rollouts/{id}, POST /cancel")
    .option('--config <path>', 'config YAML')
    .option('--host <address>', 'address to bind (serve.host, default 127.0.0.1); any other address needs the dashboard credentials or serve.allow_from')
    .option('--port <n>', 'port (serve.port, default 8088; 0 = any free port)')
    .option('--run-id <id>', "the service's run: a new one by default; an id a serve made before shares or resumes it")
    .option('--with-workers', `run this host's ${wordList(WORKER_ROLES, 'and')} roles in this process too`)
    .option('--update-settings', 'serve an existing --run-id with the run settings given as ++key=value (refused once rollouts of it finished); without it, a difference is refused')
    .addHelpText(
      'after',
      `${SETTINGS_HELP}\n` +
        '  VCFLEET_DASHBOARD_TOKEN (bearer) or VCFLEET_DASHBOARD_USER + VCFLEET_DASHBOARD_PASSWORD (basic auth):\n' +
        '                      credentials, required beyond 127.0.0.1; once set, every route needs them\n' +
        '                      (without them any local user may use every route)\n' +
        "  serve.allow_from:   addresses/CIDRs that need no credentials ('++serve.allow_from=[10.0.0.7]'); others still do\n" +
        `Without --with-workers, start \`${vcfleetCommand(`worker ${WORKER_ROLES.join('|')} --run-id <the run id printed>`)}\` on any host.`,
    )
    .action(async (opts: ServeFlags) => {
      const context = cli.context(opts, flagsOf(opts));
      const { logger } = context;
      let config = context.config;
      const d = config.dashboard;
      // Refuse an unprotected public bind before touching Redis or opening any port.
      const credentials = { user: d.user, password: d.password, token: d.token };
      const allowFrom = addressAllowlist(config.serve.allow_from);
      if (!isLoopback(config.serve.host) && !hasCredentials(credentials) && allowFrom.size === 0) {
        throw new ConfigError(
          `refusing to serve rollouts on ${config.serve.host} without credentials: set VCFLEET_DASHBOARD_TOKEN (bearer token) or ` +
            'VCFLEET_DASHBOARD_USER and VCFLEET_DASHBOARD_PASSWORD (basic auth), the dashboard\'s, or list the trainer\'s addresses in ' +
            "serve.allow_from (e.g. '++serve.allow_from=[10.0.0.0/8]'), or bind 127.0.0.1",
        );
      }
      checkBind(config.serve.host, credentials, allowFrom);
      const releasers = new Releasers(logger);
      const inFlight = new InFlightJobs();
      let url: string;
      let runId: string;
      try {
        // The runs `vcfleet runs` lists: REDIS_URL, else this folder's private Redis when it has data.
        const found = await connectToRuns(config, logger, 'worker');
        releasers.add('close the Redis connection', () => found.close());
        const redis: Redis = found.redis;
        if (found.url) config = { ...config, redis_url: found.url };
        logger.info({ redis: found.where }, 'serving runs of this Redis');
        // The run's settings are decided, and this host's preflight passed, before the run exists.
        const planned = await planServiceRun({ config, redis });
        const asked = askedRunSettings(cli.overrides);
        const newRun = vcfleetCommand(['serve', opts.withWorkers ? '--with-workers' : '', '--run-id NEW', ...cli.overrides.filter((o) => asked.some((k) => o.startsWith(`++${k}=`)))].filter(Boolean).join(' '));
        const record = planned.existing
          ? await holdRunSettings(new RunStore(redis, config.queues.prefix), planned.existing, config, { asked, update: Boolean(opts.updateSettings), newRun, updateFlag: '--update-settings' })
          : planned.record;
        if (opts.withWorkers) {
          await preflightRoles(config, new Set(WORKER_ROLES), { model: record.policy_model, policy: runSettings(record).policy, hint: '++preflight.enabled=false' }, { outputFolder: false });
        }
        const { run, created } = await storeServiceRun({ config, redis, logger }, record);
        runId = run.run_id;
        if (opts.withWorkers) {
          // Checked above, before the run existed.
          const checked = { ...config, preflight: { ...config.preflight, enabled: false } };
          const workers = await startServeWorkers({ config: checked, logger, connection: redis, run, inFlight });
          releasers.add('stop the roles of this process', () => workers.close());
        }
        const service = new RolloutService({ config, redis, run, logger });
        releasers.add('close the rollout service', () => service.close());
        const server = await startServeServer({ config, logger, service });
        releasers.add('stop listening', () => server.close());
        url = server.url;
        logger.info({ url, run_id: runId, created, with_workers: Boolean(opts.withWorkers) }, 'serve started');
      } catch (err) {
        await releasers.release().catch(() => undefined);
        throw err;
      }
      process.stdout.write(
        `serve: ${url} (POST ${url}run) for run ${runId}` +
          (opts.withWorkers ? ' with its workers in this process\n' : `\nworkers: ${vcfleetCommand(`worker ${WORKER_ROLES.join('|')} --run-id ${runId}`)}\n`),
      );
      const stopped = await new Promise<boolean>((resolve) => {
        onShutdownSignals(logger, () => releasers.release().then(() => resolve(true), () => resolve(false)), {
          inFlight, stopping: opts.withWorkers ? undefined : 'stopping serve; accepted requests stay queued for the workers',
        });
      });
      logger.info(stopped ? 'serve stopped' : 'serve stopped, but some of it could not be released (logged above)');
      if (!stopped) process.exitCode = 1;
      exitSoon();
    });
}
