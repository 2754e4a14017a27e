/**
 * Chooses the sandbox provider from the config (`sandbox_provider`): `local` (bubblewrap on the
 * worker's host) or `opensandbox` (a remote OpenSandbox server).
 */
import type { Config } from '../../../shared/config.ts';
import { ConfigError } from '../../../shared/errors.ts';
import type { Logger } from '../../../shared/logger.ts';
import { LocalBwrapProvider } from './local-bwrap.ts';
import { OpenSandboxProvider } from './opensandbox.ts';
import type { SandboxProvider } from './types.ts';

export type {
  BoxItem, BoxReport, BoxResource, ExecOptions, ExecResult, LimitHits, LimitName, Sandbox, SandboxProvider, SandboxResources, SandboxSpec,
} from './types.ts';
export { describeLimitHit, unenforced } from './box-report.ts';

export interface SandboxProviderDeps {
  logger: Logger;
  /** `local` only: host paths visible read-only at the same path (e.g. the OpenCode binary's folder). */
  extraRoBinds?: string[];
}

export function createSandboxProvider(config: Config, deps: SandboxProviderDeps): SandboxProvider {
  const logger = deps.logger.child({ component: 'sandbox', provider: config.sandbox_provider });
  if (config.sandbox_provider === 'opensandbox') {
    const sc = config.sandbox_config;
    if (!sc.domain) {
      throw new ConfigError('sandbox_config.domain (OPENSANDBOX_DOMAIN) is required when sandbox_provider=opensandbox');
    }
    return new OpenSandboxProvider({
      domain: sc.domain,
      apiKey: sc.api_key,
      image: sc.image,
      ttlS: sc.ttl_s,
      resources: sc.resources,
      workdir: config.sandbox_workdir,
      logger,
    });
  }
  return new LocalBwrapProvider({
    workdir: config.sandbox_workdir,
    extraRoBinds: deps.extraRoBinds,
    resources: config.sandbox_config.resources,
    hostUid: config.sandbox_config.host_uid,
    logger,
  });
}
