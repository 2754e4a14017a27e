/**
 * The front door of the sandboxes: the providers, by the name `sandbox_provider` gives them, the
 * contract every sandbox keeps (types.ts), the check of what a host's sandboxes are held to
 * (box-check.ts), the trial sandbox of preflight (box-trial.ts), and this host's cgroups as the worker sees them. A provider is one folder
 * (`local/`, `opensandbox/`, `docker/`) and one line here; what differs between providers each declares in its
 * `capabilities` (types.ts), so nothing else in the fleet asks which provider it runs on. Other
 * folders import this file only.
 */
import type { Config } from '../shared/config/load.ts';
import { nearestKey } from '../shared/config/key-paths.ts';
import { ConfigError } from '../shared/errors.ts';
import { dockerProvider } from './docker/register.ts';
import { localProvider } from './local/register.ts';
import { openSandboxProvider } from './opensandbox/register.ts';
import type { ProviderRegistration, SandboxProvider, SandboxProviderDeps } from './types.ts';

export type {
  BoxItem, BoxReport, BoxResource, ExecOptions, ExecResult, LimitHits, LimitName, ProviderRegistration, Sandbox, SandboxCapabilities, SandboxProvider,
  SandboxProviderDeps, SandboxResources, SandboxSpec,
} from './types.ts';
export { describeLimitHit, unenforced } from './box-report.ts';
export { checkSandboxBox, unenforcedNotice } from './box-check.ts';
export { trySandbox } from './box-trial.ts';
export { HOST_CGROUP_PATHS, ownMemoryCgroup, readText, type CgroupPaths } from './host-cgroups.ts';

/** Every provider, by its `sandbox_provider` name. */
export const SANDBOX_PROVIDERS: Readonly<Record<string, ProviderRegistration>> = {
  local: localProvider,
  opensandbox: openSandboxProvider,
  docker: dockerProvider,
};

/** The provider `sandbox_provider` names, built from this host's configuration; a ConfigError names the known ones. */
export function createSandboxProvider(config: Config, deps: SandboxProviderDeps): SandboxProvider {
  const name = config.sandbox_provider;
  const registration = SANDBOX_PROVIDERS[name];
  if (!registration) {
    const known = Object.keys(SANDBOX_PROVIDERS);
    const near = nearestKey(name, known);
    throw new ConfigError(`unknown sandbox_provider "${name}"${near ? ` (did you mean "${near}"?)` : ''}: use one of ${known.join(', ')}`);
  }
  return registration.create(config, { ...deps, logger: deps.logger.child({ component: 'sandbox', provider: name }) });
}
