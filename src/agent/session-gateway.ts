/**
 * The policy gateway of one rollout, listening where its sandbox can reach it, as its provider says
 * (`capabilities.gateway`): Unix sockets in a fresh host folder (bridged to `127.0.0.1:<gateway_port>`
 * inside; with `verifiesCallOrigin`, one socket for the agent's own connections and one for the
 * rest), or a free TCP port of the worker that remote sandboxes reach by `gatewayHost`.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import type { RolloutRequest } from '../shared/ports/agent.ts';
import { ConfigError, InfraError, errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/logger.ts';
import { GATEWAY_DIR_PREFIX, startPolicyGateway, type PolicyGateway, type PolicyGatewayOptions } from '../gateway/index.ts';
import type { SandboxCapabilities, SandboxSpec } from '../sandboxes/index.ts';
import { safeFileStem } from '../shared/records/transcript.ts';

export interface SessionGatewayOptions {
  /** What the sandbox provider offers: how its sandboxes reach the gateway, and whether it vouches for origins. */
  capabilities: SandboxCapabilities;
  /** Host folder for the gateway's Unix sockets. */
  socketDir: string;
  /** Port of the gateway inside a sandbox that reaches it through Unix sockets. */
  gatewayPort: number;
  /** Name of this worker as remote sandboxes reach it over TCP. */
  gatewayHost: string | null;
  logger: Logger;
}

export interface SessionGateway {
  gateway: PolicyGateway;
  spec: SandboxSpec['gateway'];
  /** Removes the socket folder (after the gateway closed). */
  cleanup(): Promise<void>;
}

type Callbacks = Pick<PolicyGatewayOptions, 'onCall' | 'onBudgetExhausted' | 'pace' | 'maxWaitS' | 'onWaitExceeded' | 'onQuotaGone'>;

function gatewayOptions(request: RolloutRequest, accessToken: string, logger: Logger, callbacks: Callbacks): Omit<PolicyGatewayOptions, 'socketPath' | 'tcp'> {
  return {
    policy: request.policy,
    accessToken,
    imageBudgetBytes: request.transcript.imageBudgetBytes,
    capture: request.policy.settings.capture
      ? { path: path.join(request.captureDir, `${safeFileStem(request.rolloutId)}.calls.jsonl`), imageDir: path.join(request.captureDir, 'images') }
      : null,
    logger,
    ...callbacks,
  };
}

export async function openSessionGateway(options: SessionGatewayOptions, request: RolloutRequest, accessToken: string, callbacks: Callbacks): Promise<SessionGateway> {
  const common = gatewayOptions(request, accessToken, options.logger, callbacks);
  if (options.capabilities.gateway === 'unix') {
    const parent = options.socketDir;
    const dir = await mkdir(parent, { recursive: true })
      .then(() => mkdtemp(path.join(parent, GATEWAY_DIR_PREFIX)))
      .catch((err: unknown) => {
        throw new InfraError(`could not create a folder for the gateway socket under ${parent}: ${errorMessage(err)}`, { cause: err });
      });
    const agentSocketPath = options.capabilities.verifiesCallOrigin ? path.join(dir, 'agent.sock') : undefined;
    const gateway = await startPolicyGateway({ ...common, socketPath: path.join(dir, 'gateway.sock'), agentSocketPath }).catch(async (err: unknown) => {
      await rm(dir, { recursive: true, force: true });
      throw new InfraError(`could not start the policy gateway: ${errorMessage(err)}`, { cause: err });
    });
    return { gateway, spec: { socketPath: gateway.socketPath, agentSocketPath, port: options.gatewayPort }, cleanup: () => rm(dir, { recursive: true, force: true }) };
  }
  if (!options.gatewayHost) throw new ConfigError('sandbox_config.gateway_host (VCFLEET_GATEWAY_HOST) must name this worker as the sandboxes reach it');
  const gateway = await startPolicyGateway({ ...common, tcp: { host: '0.0.0.0', port: 0 } });
  return { gateway, spec: { url: `http://${options.gatewayHost}:${gateway.tcpPort}`, port: gateway.tcpPort! }, cleanup: async () => {} };
}
