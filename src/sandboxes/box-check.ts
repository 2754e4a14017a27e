/**
 * At sandbox-worker start: say once what every sandbox is held to, and refuse to start when a limit
 * cannot be enforced on this host, unless the config accepts that
 * (`sandbox_config.enforce_resources: false`, then a loud warning instead).
 */
import type { Config } from '../shared/config/load.ts';
import { ConfigError } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { unenforced } from './box-report.ts';
import type { BoxReport, SandboxProvider } from './types.ts';

/** How to grant what is missing, for the refusal and the warning. */
export const GRANT_HINT =
  'run the sandbox-worker as root (cgroups and a tmpfs per sandbox need it); rootless, a delegated cgroup such as ' +
  '`systemd-run --user --scope -p Delegate=yes vcfleet worker sandbox` gives memory, pids and cpu, but the disk still needs ' +
  'root or CAP_SYS_ADMIN; install python3-seccomp for the seccomp filter; in Docker, run the worker as root with ' +
  '`--cap-add SYS_ADMIN --cgroupns private --security-opt seccomp=sandbox-worker-seccomp.json --security-opt apparmor=unconfined ' +
  '--security-opt systempaths=unconfined` and a writable /sys/fs/cgroup (see docker-compose.yml)';

/**
 * Probes the provider, logs the report, and returns it. Throws ConfigError when something is not
 * enforced and `sandbox_config.enforce_resources` is true.
 */
export async function checkSandboxBox(provider: SandboxProvider, config: Config, logger: Logger): Promise<BoxReport> {
  const report = await provider.probe();
  const missing = unenforced(report);
  const resources = config.sandbox_config.resources;
  if (missing.length === 0) {
    logger.info({ box: report, resources }, 'sandbox limits: every limit is enforced');
    return report;
  }
  if (config.sandbox_config.enforce_resources) {
    throw new ConfigError(
      `the ${provider.name} sandboxes cannot be held to their limits on this host: ${missing.join('; ')}. ` +
        `To grant them: ${GRANT_HINT}. To run anyway without them: ++sandbox_config.enforce_resources=false`,
    );
  }
  logger.warn(
    { box: report, resources, notEnforced: missing },
    `SANDBOX LIMITS NOT ENFORCED (sandbox_config.enforce_resources=false): sandboxed code may use more than ${missing.map((m) => m.split(' ')[0]).join(', ')} allow, at the expense of this host. To grant them: ${GRANT_HINT}`,
  );
  return report;
}

/** The notice a worker publishes for `vcfleet status` when its sandboxes run without some limits; null when all hold. */
export function unenforcedNotice(report: BoxReport, workerId: string): string | null {
  const missing = unenforced(report);
  return missing.length ? `sandbox limits NOT enforced on ${workerId} (sandbox_config.enforce_resources=false): ${missing.join('; ')}` : null;
}
