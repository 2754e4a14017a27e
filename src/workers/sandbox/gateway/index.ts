/** The per-rollout policy gateway. */
export { startPolicyGateway, type PolicyGateway, type PolicyGatewayOptions, type GatewayCall, type GatewayStats } from './policy-gateway.ts';
export { upstreamGiveUpReason, DEFAULT_UPSTREAM_FAILURE_LIMITS, type UpstreamFailureLimits } from './health.ts';
