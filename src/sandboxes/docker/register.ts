/** The `docker` provider as the registry builds it from a worker's configuration. */
import type { ProviderRegistration } from '../types.ts';
import { DockerProvider } from './provider.ts';

export const dockerProvider: ProviderRegistration = {
  summary: 'containers of the sandbox image on this host\'s Docker engine',
  create: (config, { logger }) =>
    new DockerProvider({
      image: config.sandbox_config.image,
      opencodeBin: config.sandbox_config.opencode_bin,
      socketPath: config.sandbox_config.docker_socket,
      workdir: config.sandbox_workdir,
      resources: config.sandbox_config.resources,
      logger,
    }),
};
