/** The `opensandbox` provider as the registry builds it from a worker's configuration. */
import { ConfigError } from '../../shared/errors.ts';
import type { ProviderRegistration } from '../types.ts';
import { OpenSandboxProvider } from './provider.ts';

export const openSandboxProvider: ProviderRegistration = {
  summary: 'remote sandboxes of an OpenSandbox server',
  create(config, { logger }) {
    const sc = config.sandbox_config;
    if (!sc.domain) throw new ConfigError('sandbox_config.domain (OPENSANDBOX_DOMAIN) is required when sandbox_provider=opensandbox');
    return new OpenSandboxProvider({
      domain: sc.domain, apiKey: sc.api_key, image: sc.image, opencodeBin: sc.opencode_bin, ttlS: sc.ttl_s, resources: sc.resources, workdir: config.sandbox_workdir, useServerProxy: sc.use_server_proxy, logger,
    });
  },
};
