/**
 * The per-rollout policy gateway, and this folder's front door (other folders import this file
 * only): the only door out of a sandbox. OpenCode (and anything else the
 * model runs) reaches it over a Unix socket bridged into the sandbox, or over TCP. It is a strict
 * allowlist proxy: `POST /v1/chat/completions` with a body that parses as a chat call is forwarded
 * to the worker's policy endpoint with the real key (which never enters the sandbox), the model set
 * to the policy model and the output capped; `GET /v1/models` is answered here; everything else is
 * refused with a 4xx and counted. Bodies, concurrent calls and calls per rollout are bounded, and no
 * input, however malformed, can throw past the connection it came on.
 *
 * Each forwarded call of the agent's own conversation is recorded as the gateway saw it (status,
 * connection, the assembled answer, what the request added to the conversation): the rollout's
 * outcome and transcript come from here. Calls something else in the sandbox made are forwarded and
 * counted as forged, never recorded (conversation.ts). What is kept per rollout is bounded (kept-text.ts).
 */
import type { PolicyGateway, PolicyGatewayOptions } from './gateway-options.ts';
import { GatewayServer } from './gateway-server.ts';

export { isAnswered, isServerFailure, type GatewayCall, type GatewayStats } from './call-stats.ts';
export type { StoredImage } from './conversation.ts';
export type { PolicyGateway, PolicyGatewayOptions } from './gateway-options.ts';
export { probePolicyServer, type ProbeResult } from './probe.ts';
export { GATEWAY_DIR_PREFIX, reapOrphanGatewayDirs } from './socket-dirs.ts';
export type { TokenCall, TokenCaptureRecord } from './token-recorder.ts';

export async function startPolicyGateway(options: PolicyGatewayOptions): Promise<PolicyGateway> {
  if (!options.socketPath && !options.tcp) throw new Error('policy gateway needs a socketPath or a tcp listener');
  const gateway = new GatewayServer(options);
  try {
    await gateway.start();
  } catch (err) {
    await gateway.close();
    throw err;
  }
  return gateway;
}
