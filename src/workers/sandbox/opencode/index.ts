/** The OpenCode agent: the runner, and the binary helpers the sandbox wiring needs. */
export { createOpenCodeRunner, type OpenCodeRunnerOptions, type OpenCodeLogSummary } from './runner.ts';
export { opencodeBinaryPath, opencodeRoBinds } from './binary.ts';
export { decideOutcome, type Outcome } from './outcome.ts';
export { SessionEventLog } from './events.ts';
