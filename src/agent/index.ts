/**
 * The front door of the agent runner (other folders import this file only): the AgentRunner a
 * sandbox-worker uses, chosen by `agent.kind`.
 */
import type { AgentRunner } from '../shared/ports/agent.ts';
import type { Config } from '../shared/config/load.ts';
import type { Logger } from '../shared/logger.ts';
import { createOpenCodeRunner } from './opencode-runner.ts';
import { checkSandboxBox, createSandboxProvider, trySandbox, type BoxReport, type SandboxProvider } from '../sandboxes/index.ts';
import { createScriptedAgent, loadAgentScript } from './scripted-agent.ts';

export type { BoxReport } from '../sandboxes/index.ts';

export interface AgentRunnerDeps {
  /** The sandbox provider; default the one `sandbox_provider` names, built from the config. */
  provider?: SandboxProvider;
  /** Called once at start with what the sandboxes are held to (e.g. to publish it for `vcfleet status`). */
  onBoxReport?: (report: BoxReport) => void;
}

/**
 * Builds the runner. With a sandbox provider, first checks what its sandboxes are held to
 * (box-check.ts: throws ConfigError when a limit cannot be enforced and `enforce_resources` is
 * true) and, with `preflight.enabled`, starts one trial sandbox; then removes what dead workers of
 * this host left behind.
 */
export async function createAgentRunner(config: Config, logger: Logger, deps: AgentRunnerDeps = {}): Promise<AgentRunner> {
  if (config.agent.kind === 'scripted') return createScriptedAgent(loadAgentScript(config.agent.script_path));
  const provider =
    deps.provider ?? createSandboxProvider(config, { logger });
  try {
    const report = await checkSandboxBox(provider, config, logger);
    deps.onBoxReport?.(report);
    await reapLeftovers(provider, logger);
    if (config.preflight.enabled) await trySandbox(provider, config);
  } catch (err) {
    await provider.close();
    throw err;
  }
  return createOpenCodeRunner({ config, logger, provider });
}

/** What dead workers of this host left behind (the provider knows what: sandboxes, gateway sockets). */
async function reapLeftovers(provider: SandboxProvider, logger: Logger): Promise<void> {
  const reaped = await provider.reapOrphans();
  if (reaped > 0) logger.warn({ reaped }, 'removed sandboxes left behind by a dead worker of this host');
}
