/**
 * The real AgentRunner: one OpenCode session per rollout in a fresh sandbox (rollout-session.ts).
 * The runner holds what rollouts share (the provider, the binary, the limits) and the sessions
 * running now, so that closing it stops them all and closes the provider.
 */
import os from 'node:os';
import type { AgentResult, AgentRunner, RolloutRequest } from '../shared/ports/agent.ts';
import type { Config } from '../shared/config/load.ts';
import type { Logger } from '../shared/logger.ts';
import { describeLimitHit, type LimitHits, type SandboxProvider } from '../sandboxes/index.ts';
import { DEFAULT_UPSTREAM_FAILURE_LIMITS, type UpstreamFailureLimits } from './upstream-give-up.ts';
import { RolloutSession } from './rollout-session.ts';

export interface OpenCodeRunnerOptions {
  config: Config;
  logger: Logger;
  provider: SandboxProvider;
  /** The OpenCode binary as seen inside the sandbox; default what the provider says (`capabilities.agentBinary`). */
  opencodeBin?: string;
  /** Host folder for the gateways' Unix sockets; default the OS temp folder. */
  socketDir?: string;
  /** When to give up on a policy server that only fails (defaults: 5 failures in a row, or 120 s). */
  upstreamFailureLimits?: Partial<UpstreamFailureLimits>;
}

export function createOpenCodeRunner(options: OpenCodeRunnerOptions): AgentRunner {
  const { config, logger, provider } = options;
  const bin = options.opencodeBin ?? provider.capabilities.agentBinary(config);
  const deps = {
    provider,
    logger,
    bin,
    gateway: { socketDir: options.socketDir ?? os.tmpdir(), gatewayPort: config.sandbox_config.gateway_port, gatewayHost: config.sandbox_config.gateway_host },
    upstreamLimits: { ...DEFAULT_UPSTREAM_FAILURE_LIMITS, ...options.upstreamFailureLimits },
    describeLimitHit: (hits: LimitHits) => describeLimitHit(hits, config.sandbox_config.resources),
    runtimeHeapMib: config.agent.runtime_heap_mib,
  };
  const running = new Set<RolloutSession>();
  let closing: Promise<void> | null = null;

  return {
    host: { usesHostMemory: provider.capabilities.usesHostMemory, maxLifetimeS: provider.capabilities.maxLifetimeS },
    async run(request: RolloutRequest, signal: AbortSignal): Promise<AgentResult> {
      const session = new RolloutSession(deps, request);
      running.add(session);
      try {
        return await session.run(signal);
      } finally {
        running.delete(session);
      }
    },
    close() {
      closing ??= (async () => {
        for (const s of running) s.abort(new Error('runner closed'));
        await provider.close();
      })();
      return closing;
    },
  };
}
