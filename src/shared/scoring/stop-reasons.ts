/** How a rollout's session ended (decided by the sandbox-worker from facts the model cannot cause). */
export const STOP_REASONS = ['answered', 'no_answer', 'timeout', 'output_cap', 'context_limit', 'agent_error'] as const;
export type StopReason = (typeof STOP_REASONS)[number];
