/** The `local` provider as the registry builds it from a worker's configuration. */
import { opencodeRoBinds } from './opencode-binary.ts';
import type { ProviderRegistration } from '../types.ts';
import { LocalBwrapProvider } from './provider.ts';

export const localProvider: ProviderRegistration = {
  summary: 'bubblewrap sandboxes on the worker\'s own host',
  create: (config, { logger }) =>
    new LocalBwrapProvider({
      workdir: config.sandbox_workdir,
      // The OpenCode binary runs inside from its host folder, bound read-only at the same path.
      extraRoBinds: config.agent.kind === 'opencode' ? opencodeRoBinds(config) : [],
      resources: config.sandbox_config.resources,
      hostUid: config.sandbox_config.host_uid,
      logger,
    }),
};
