/** The AgentRunner a sandbox-worker uses, chosen by `agent.kind`. */
import os from 'node:os';
import type { AgentRunner } from '../../shared/agent.ts';
import type { Config } from '../../shared/config.ts';
import type { Logger } from '../../shared/logger.ts';
import { opencodeRoBinds } from './opencode/binary.ts';
import { reapOrphanGatewayDirs } from './opencode/gateway-dirs.ts';
import { createOpenCodeRunner } from './opencode/runner.ts';
import { createSandboxProvider } from './sandboxes/index.ts';
import { createScriptedAgent, loadAgentScript } from './scripted-agent.ts';

export async function createAgentRunner(config: Config, logger: Logger): Promise<AgentRunner> {
  if (config.agent.kind === 'scripted') return createScriptedAgent(loadAgentScript(config.agent.script_path));
  const provider = createSandboxProvider(config, { logger, extraRoBinds: config.sandbox_provider === 'local' ? opencodeRoBinds(config) : [] });
  const reaped = await provider.reapOrphans();
  if (reaped > 0) logger.warn({ reaped }, 'removed sandboxes left behind by a dead worker of this host');
  if (config.sandbox_provider === 'local') {
    const gateways = await reapOrphanGatewayDirs(os.tmpdir());
    if (gateways > 0) logger.warn({ gateways }, 'removed gateway socket folders left behind by a dead worker of this host');
  }
  return createOpenCodeRunner({ config, logger, provider });
}
